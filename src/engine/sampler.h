// Sampler: chooses one sequence's next token from a row of f32 logits.
//
// Order of processing (vLLM's): logit_bias; repetition penalty over prompt and output tokens
// (positive logits divided by it, negative ones multiplied); presence and frequency penalties
// over output tokens; eos (unless ignore_eos) and stop tokens masked while fewer than min_tokens
// were generated. Then greedy takes the argmax (lowest id on ties); otherwise logits are divided
// by the temperature, and min_p, top_k and top_p cut the distribution, in that order, before one
// draw from it.
//
// Structured output: with an `allowed` bitmask (bit id % 32 of word id / 32; ids past the mask
// are disallowed) every disallowed token's logit becomes -inf after the processing above, so it
// is never drawn, greedy or not. Where the processing leaves no allowed token a finite logit
// (min_tokens masking the only allowed end id, say), the grammar wins: the allowed token with the
// highest raw logit is taken (lowest id on ties), so a constrained output never leaves its grammar.
//
// Logprobs are the natural-log softmax over the full vocabulary of the *raw* logits, before any
// of the processing above (vLLM's default "raw logprobs"; the golden files are made this way):
// they describe the model, not the sampling parameters nor a grammar's mask (a constrained
// token's logprob is the model's, unrenormalized over the allowed tokens). Top logprobs are
// ordered by logprob, then by lower id.
//
// Determinism: the result is a function of (logits row, params, tokens so far, seed, sample
// index) alone. The draw for output token t of sample i is Philox(seed, counter = (t, i)), so a
// seeded request is reproducible whatever else runs and however often it was recomputed.
// Not thread-safe (scratch buffers); one per engine thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/finish_reason.h"
#include "engine/sampling_params.h"

namespace deepinfer {

struct TopLogprob {
  int32_t token = 0;
  float logprob = 0.0f;
};

struct SampledToken {
  int32_t token = 0;
  float logprob = 0.0f;           // when params.wants_logprobs()
  std::vector<TopLogprob> top;    // params.top_logprobs entries
  // Set by SequenceGrammars after the grammar took the token: kStop when the output is complete
  // and nothing may follow, kError when the matcher failed; kNone otherwise.
  FinishReason grammar_finish = FinishReason::kNone;
};

class Sampler {
 public:
  explicit Sampler(int vocab_size);

  // `logits`: [vocab_size] raw logits. `tokens`: the sequence so far, its first n_prompt the
  // prompt. `eos_token_ids`: the model's. `allowed`: empty, or a grammar's mask (above) with at
  // least one token allowed.
  SampledToken sample(std::span<const float> logits, const SamplingParams& params,
                      std::span<const int32_t> tokens, int n_prompt,
                      std::span<const int32_t> eos_token_ids, uint64_t seed, int sample_index,
                      std::span<const uint32_t> allowed = {});

 private:
  void process(std::span<const float> logits, const SamplingParams& params, std::span<const int32_t> tokens,
               int n_prompt, std::span<const int32_t> eos_token_ids, std::span<const uint32_t> allowed);
  int32_t draw(const SamplingParams& params, double u);
  // Moves the top-p nucleus to the front of ids_ and returns its size: the fewest most likely
  // candidates (probability, then lower id) whose mass (work_) reaches `target`.
  size_t select_nucleus(double target);

  int vocab_size_;
  std::vector<float> work_;       // [vocab_size] processed logits, then probabilities
  std::vector<int32_t> ids_;      // candidate token ids
  std::vector<int32_t> scratch_;  // sorted token ids for penalties
};

// Index of the largest value, the lowest index among equals.
int32_t argmax(std::span<const float> values);
// Whether bit `id` of a token bitmask is set (false past its end).
inline bool mask_allows(std::span<const uint32_t> mask, int32_t id) {
  return size_t(id) / 32 < mask.size() && (mask[size_t(id) / 32] >> (id % 32) & 1u);
}

}  // namespace deepinfer
