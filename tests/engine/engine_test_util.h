// Helpers for engine tests: a varied workload, running it through an EngineCore, and reference
// outputs of the fake model.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/engine_core.h"
#include "fake_causal_lm.h"

namespace deepinfer::test {

// Runs every request (ids first_id, first_id + 1, ...) to completion on `core`; results in order.
std::vector<CompletedRequest> run_to_completion(EngineCore& core, const std::vector<Request>& requests,
                                                uint64_t first_id = 0);

// A fresh engine core per request: each request's output when it runs alone.
std::vector<CompletedRequest> run_alone(CausalLM& model, const EngineOptions& options, const std::vector<Request>& requests);

std::unique_ptr<EngineCore> make_core(CausalLM& model, const EngineOptions& options);

// Requests of many kinds: greedy and seeded sampling (temperature, top-k/p, min-p, penalties,
// logit bias), n > 1, logprobs, stop tokens, min/max tokens; prompts sharing prefixes.
std::vector<Request> varied_requests(int n, uint32_t seed, int vocab_size);

// Bitwise comparison of ids, logprobs and finish reasons; `what` names the configuration.
void expect_same_outputs(const std::vector<CompletedRequest>& expected, const std::vector<CompletedRequest>& actual,
                         const char* what);

// What the engine must produce for a seeded request on the fake model, computed without an
// engine: each sample replays the sampler on reference logits, token by token.
CompletedRequest fake_reference(const Request& request, const FakeCausalLM& model);

// Greedy ids the fake model yields after `prompt`.
std::vector<int32_t> fake_greedy(std::vector<int32_t> prompt, int n_tokens, int vocab_size);

}  // namespace deepinfer::test
