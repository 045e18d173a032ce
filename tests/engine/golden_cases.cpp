#include "golden_cases.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <omp.h>

#include "core/check.h"
#include "engine/kv_cache.h"
#include "engine_test_util.h"
#include "model/loader.h"

namespace deepinfer::test {
namespace {

const bool kOneThread = [] {  // see golden_cases.h
  omp_set_num_threads(1);
  return true;
}();

}  // namespace

std::vector<GoldenCase> load_golden(const std::string& model) {
  std::ifstream f("tests/data/models/" + model + "/golden.json");
  EXPECT_TRUE(f.good()) << "tests/data/models/" << model << "/golden.json (run from the project root)";
  const auto j = nlohmann::json::parse(f);
  std::vector<GoldenCase> cases;
  for (const auto& c : j.at("cases")) {
    GoldenCase g;
    g.prompt = c.at("prompt_ids").get<std::vector<int32_t>>();
    for (const auto& s : c.at("steps")) {
      GoldenStep step{s.at("token").get<int32_t>(), s.at("logprob").get<double>(), {}};
      for (const auto& t : s.at("top5")) step.top5.emplace_back(t.at(0).get<int32_t>(), t.at(1).get<double>());
      g.steps.push_back(std::move(step));
    }
    cases.push_back(std::move(g));
  }
  return cases;
}

std::unique_ptr<CausalLM> load(const std::string& model, const ModelOptions& options) {
  auto m = load_causal_lm("tests/data/models/" + model, options);
  EXPECT_TRUE(m.ok()) << m.status().message();
  return std::move(m).value();
}

std::vector<Request> golden_requests(const std::vector<GoldenCase>& cases) {
  std::vector<Request> out;
  for (const auto& c : cases) {
    Request r;
    r.prompt_token_ids = c.prompt;
    r.params.temperature = 0;
    r.params.max_tokens = int(c.steps.size());
    r.params.ignore_eos = true;
    r.params.top_logprobs = 5;
    out.push_back(std::move(r));
  }
  return out;
}

EngineOptions options(DType kv, int chunk, int block_size) {
  EngineOptions o;
  o.kv_cache_dtype = kv;
  o.max_num_batched_tokens = chunk;
  o.block_size = block_size;
  o.kv_cache_memory_bytes = size_t(64) << 20;
  return o;
}

size_t kv_budget_for_tokens(const CausalLM& model, const EngineOptions& o, int n_tokens) {
  auto kinds = model.kv_kinds(o.kv_cache_dtype, o.block_size);
  DI_CHECK(kinds.ok());
  const size_t full = size_t(double(n_tokens) * kv_bytes_per_token(*kinds, o.block_size)) + 1;
  size_t one_sequence_windows = 0;  // what kv_blocks_for_budget gives windows at the least
  for (const KvKindSpec& k : *kinds) {
    if (k.lookback == 0) continue;
    const int blocks = window_blocks_per_sequence(k, o.block_size, o.max_num_batched_tokens);
    one_sequence_windows += size_t(blocks) * size_t(k.n_slabs) * k.bytes_per_block;
  }
  return one_sequence_windows > 0 ? 2 * std::max(full, one_sequence_windows) : full;
}

// Ids must match; returns the largest |logprob - golden| over chosen tokens and the top 5.
double golden_error(const std::vector<GoldenCase>& cases, const std::vector<CompletedRequest>& out, bool logprobs) {
  double worst = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const CompletedSample& s = out[i].samples.at(0);
    EXPECT_EQ(s.token_ids.size(), cases[i].steps.size());
    for (size_t t = 0; t < std::min(s.token_ids.size(), cases[i].steps.size()); ++t) {
      const GoldenStep& g = cases[i].steps[t];
      EXPECT_EQ(s.token_ids[t], g.token) << "case " << i << " step " << t;
      if (!logprobs) continue;
      worst = std::max(worst, std::fabs(s.logprobs[t].logprob - g.logprob));
      for (size_t k = 0; k < 5; ++k) {
        EXPECT_EQ(s.logprobs[t].top[k].token, g.top5[k].first) << "case " << i << " step " << t << " rank " << k;
        worst = std::max(worst, std::fabs(s.logprobs[t].top[k].logprob - g.top5[k].second));
      }
    }
  }
  return worst;
}

void expect_chunked_cached_and_batched_alike(CausalLM& model, const std::vector<Request>& requests, DType kv,
                                             const std::string& what) {
  const auto alone = run_alone(model, options(kv, 2048), requests);
  auto chunked = make_core(model, options(kv, 5, 16));
  expect_same_outputs(alone, run_to_completion(*chunked, requests), (what + ", chunk 5").c_str());
  expect_same_outputs(alone, run_to_completion(*chunked, requests, 100), (what + ", warm prefix cache").c_str());
  auto all = requests;
  const auto others = varied_requests(40, 23, model.info().vocab_size);
  all.insert(all.end(), others.begin(), others.end());
  EngineOptions tight = options(kv, 96, 16);
  tight.kv_cache_memory_bytes = kv_budget_for_tokens(model, tight, 1400);
  auto core = make_core(model, tight);
  auto together = run_to_completion(*core, all);
  EXPECT_GT(core->stats().n_preemptions, 0u) << what;
  together.resize(requests.size());
  expect_same_outputs(alone, together, (what + ", among 40 others with preemption").c_str());
}

}  // namespace deepinfer::test
