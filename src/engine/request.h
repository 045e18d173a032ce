// What a client hands the engine (Request) and what it gets back (RequestOutput updates, or a
// CompletedRequest once every sample finished). Native types; JSON lives in the server.
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "engine/finish_reason.h"
#include "engine/sampler.h"
#include "engine/sampling_params.h"

namespace deepinfer {

struct Request {
  std::vector<int32_t> prompt_token_ids;
  SamplingParams params;
  int priority = 0;  // lower runs first; first come, first served within a priority
};

struct RequestTiming {
  using Clock = std::chrono::steady_clock;
  Clock::time_point arrival;          // submit()
  Clock::time_point first_scheduled;  // first step that computed any of its tokens
  Clock::time_point first_token;      // first sampled token
  Clock::time_point finished;         // last sample finished (epoch until then)
};

struct TokenLogprobs {
  float logprob = 0.0f;           // of the sampled token; natural log, raw logits (sampler.h)
  std::vector<TopLogprob> top;    // params.top_logprobs most likely tokens
};

// One update of one sample: the tokens it produced since its previous update.
struct RequestOutput {
  uint64_t request_id = 0;
  int sample_index = 0;                 // [0, params.n)
  std::vector<int32_t> token_ids;
  std::vector<TokenLogprobs> logprobs;  // parallel to token_ids if params.wants_logprobs()
  FinishReason finish_reason = FinishReason::kNone;  // set on the sample's last update
  int n_prompt_tokens = 0;
  int n_cached_tokens = 0;              // prompt tokens whose KV came from the prefix cache
  RequestTiming timing;                 // as known at this update
  bool finished() const { return finish_reason != FinishReason::kNone; }
};

struct CompletedSample {
  std::vector<int32_t> token_ids;
  std::vector<TokenLogprobs> logprobs;
  FinishReason finish_reason = FinishReason::kNone;
};

struct CompletedRequest {
  uint64_t request_id = 0;
  std::vector<CompletedSample> samples;  // [params.n]
  int n_prompt_tokens = 0;
  int n_cached_tokens = 0;
  RequestTiming timing;
};

}  // namespace deepinfer
