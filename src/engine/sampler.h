// Sampler: chooses one sequence's next token from a row of f32 logits.
//
// Order of processing (vLLM's): logit_bias; repetition penalty over prompt and output tokens
// (positive logits divided by it, negative ones multiplied); presence and frequency penalties
// over output tokens; eos (unless ignore_eos) and stop tokens masked while fewer than min_tokens
// were generated. Then greedy takes the argmax (lowest id on ties); otherwise logits are divided
// by the temperature, and min_p, top_k and top_p cut the distribution, in that order, before one
// draw from it.
//
// Logprobs are the natural-log softmax over the full vocabulary of the *raw* logits, before any
// of the processing above (vLLM's default "raw logprobs"; the golden files are made this way):
// they describe the model, not the sampling parameters. Top logprobs are ordered by logprob,
// then by lower id.
//
// Determinism: the result is a function of (logits row, params, tokens so far, seed, sample
// index) alone. The draw for output token t of sample i is Philox(seed, counter = (t, i)), so a
// seeded request is reproducible whatever else runs and however often it was recomputed.
// Not thread-safe (scratch buffers); one per engine thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

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
};

class Sampler {
 public:
  explicit Sampler(int vocab_size);

  // `logits`: [vocab_size] raw logits. `tokens`: the sequence so far, its first n_prompt the
  // prompt. `eos_token_ids`: the model's.
  SampledToken sample(std::span<const float> logits, const SamplingParams& params,
                      std::span<const int32_t> tokens, int n_prompt,
                      std::span<const int32_t> eos_token_ids, uint64_t seed, int sample_index);

 private:
  void process(std::span<const float> logits, const SamplingParams& params, std::span<const int32_t> tokens,
               int n_prompt, std::span<const int32_t> eos_token_ids);
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

}  // namespace deepinfer
