// SamplingParams: how one request's tokens are chosen and when it stops (the OpenAI and vLLM
// sampling options, as native types; JSON stays in the server).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/status.h"
#include "engine/grammar_constraint.h"

namespace deepinfer {

// Temperatures below this are greedy: dividing logits by a smaller one overflows f32 (a tiny
// positive temperature would make every score infinite or NaN).
inline constexpr float kMinSamplingTemperature = 1e-5f;

struct SamplingParams {
  int n = 1;                       // parallel samples; they share the prompt's KV blocks
  float temperature = 1.0f;        // below kMinSamplingTemperature (0 included): greedy (argmax, lowest id on ties)
  int top_k = 0;                   // keep the k most likely tokens; 0: no limit
  float top_p = 1.0f;              // keep the smallest most-likely set with this much probability
  float min_p = 0.0f;              // drop tokens below min_p times the most likely one's probability
  float repetition_penalty = 1.0f; // > 1 discourages tokens of the prompt and output (CTRL-style)
  float presence_penalty = 0.0f;   // subtracted once from every token present in the output
  float frequency_penalty = 0.0f;  // subtracted per occurrence in the output
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, added logit in [-100, 100])
  std::optional<uint64_t> seed;    // reproducible whatever else runs; unset: derived per request
  bool logprobs = false;           // report each sampled token's logprob
  int top_logprobs = 0;            // and the [0, 20] most likely tokens' logprobs
  std::vector<int32_t> stop_token_ids;  // finish with "stop" after sampling one of these
  bool ignore_eos = false;         // do not stop at the model's eos tokens
  int min_tokens = 0;              // eos and stop tokens cannot be sampled before this many
  int max_tokens = 0;              // finish with "length" after this many; 0: up to max_model_len
  // Structured output: only tokens its grammar allows (SequenceGrammars); null: unconstrained.
  std::shared_ptr<const GrammarConstraint> constraint;

  bool greedy() const { return temperature < kMinSamplingTemperature; }
  bool wants_logprobs() const { return logprobs || top_logprobs > 0; }
  // Range checks, with a message naming the field.
  Status validate(int vocab_size) const;
};

}  // namespace deepinfer
