// Golden cases of the model fixtures (tests/data/models/<model>/golden.json: prompt ids and, per
// greedy step, the token, its logprob and the top 5, from the reference the fixture's README
// names), as requests and engine options for the golden tests. Loading them pins OpenMP to one
// thread: the kernels open a region per op, and on a shared, oversubscribed test machine the
// barriers cost ~30x the tiny fixtures' arithmetic (results do not depend on the thread count).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine_options.h"
#include "engine/request.h"
#include "model/causal_lm.h"

namespace deepinfer::test {

struct GoldenStep {
  int32_t token;
  double logprob;
  std::vector<std::pair<int32_t, double>> top5;
};
struct GoldenCase {
  std::vector<int32_t> prompt;
  std::vector<GoldenStep> steps;
};

// Run from the project root.
std::vector<GoldenCase> load_golden(const std::string& model);
std::unique_ptr<CausalLM> load(const std::string& model, const ModelOptions& options = {});
// Greedy, ignore_eos, top_logprobs 5, as many tokens as the case has steps.
std::vector<Request> golden_requests(const std::vector<GoldenCase>& cases);
// 64 MiB of KV in `kv`, `chunk` tokens per step.
EngineOptions options(DType kv, int chunk, int block_size = 64);
// A KV budget that gives the model's full kinds room for at least n_tokens under options o; if
// the model has windows, they get the other half (at least one sequence's: kv_blocks_for_budget).
size_t kv_budget_for_tokens(const CausalLM& model, const EngineOptions& o, int n_tokens);
// Each request's outputs bitwise the same as alone: in chunks of 5 tokens from a cold and then a
// warm prefix cache (blocks of 16), and among 40 others (sampled, n > 1, shared prefixes) in a
// `kv` cache small enough to preempt. `what` names the case in failures.
void expect_chunked_cached_and_batched_alike(CausalLM& model, const std::vector<Request>& requests, DType kv,
                                             const std::string& what);
// Ids must match the cases; returns the largest |logprob - golden| over chosen tokens and the top
// 5 (0 without `logprobs`: ids only).
double golden_error(const std::vector<GoldenCase>& cases, const std::vector<CompletedRequest>& out, bool logprobs);

}  // namespace deepinfer::test
