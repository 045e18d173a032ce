// The engine with DeepSeek-V3's MTP layer as its drafter (--speculative mtp) on
// tests/data/models/tiny-v3-mtp (the layer itself is checked against its reference in
// tests/model/deepseek_mtp_test.cpp): for k = 1..4 drafts, greedy outputs with logprobs are
// bitwise those of plain decoding (the model loaded without the MTP kinds), alone and together,
// at chunk sizes that split prompts anywhere, from a warm prefix cache at every 16-token block
// boundary, and among 30 other requests (sampled, n > 1, shared prefixes) in a cache small
// enough to preempt. The checkpoint's weights are random, so drafts are rarely right: the gate is
// off (every decode step drafts) and acceptance is printed; accepted drafts are verified by the
// same code as n-gram ones (engine_core_test).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "engine/engine_core.h"
#include "engine_test_util.h"
#include "golden_cases.h"

namespace deepinfer::test {
namespace {

const char* kModel = "tiny-v3-mtp";

// Greedy requests with top-5 logprobs, from the id sequences of the model's golden_mtp.json.
std::vector<Request> greedy_requests() {
  std::ifstream f(std::string("tests/data/models/") + kModel + "/golden_mtp.json");
  std::stringstream ss;
  ss << f.rdbuf();
  const nlohmann::json golden = nlohmann::json::parse(ss.str());
  std::vector<Request> out;
  for (const auto& c : golden["cases"]) {
    Request r;
    r.prompt_token_ids = c["ids"].get<std::vector<int32_t>>();
    r.params.temperature = 0;
    r.params.max_tokens = 24;
    r.params.ignore_eos = true;
    r.params.top_logprobs = 5;
    out.push_back(r);
  }
  return out;
}

EngineOptions with_mtp(EngineOptions o, int k) {
  o.speculative = SpeculativeMethod::kMtp;
  o.num_speculative_tokens = k;
  o.speculative_max_batch = 64;
  o.speculative_gate.min_acceptance = 0;
  return o;
}

ModelOptions drafting() {
  ModelOptions o;
  o.mtp_drafting = true;
  return o;
}

TEST(GoldenV3Mtp, SpeculationIsBitwisePlainDecoding) {
  const auto plain = load(kModel);
  const auto model = load(kModel, drafting());
  ASSERT_TRUE(model->can_draft());
  const auto requests = greedy_requests();
  const auto alone = run_alone(*plain, options(DType::F32, 2048), requests);
  for (int k = 1; k <= 4; ++k) {
    const std::string what = std::string(kModel) + ", mtp k " + std::to_string(k);
    expect_same_outputs(alone, run_alone(*model, with_mtp(options(DType::F32, 2048), k), requests),
                        (what + ", alone").c_str());
    for (int chunk : {7, 64}) {
      auto core = make_core(*model, with_mtp(options(DType::F32, chunk, 16), k));
      const std::string w = what + ", together, chunk " + std::to_string(chunk);
      expect_same_outputs(alone, run_to_completion(*core, requests), w.c_str());
      expect_same_outputs(alone, run_to_completion(*core, requests, 100), (w + ", warm prefix cache").c_str());
      const EngineStats st = core->stats();
      EXPECT_GE(st.n_prefix_hit_tokens, 96u) << w;  // every full 16-token block of the 40- and 70-token prompts
      EXPECT_GT(st.n_draft_tokens, 0u) << w;
      std::printf("%s: %llu MTP drafts, %llu accepted\n", w.c_str(), (unsigned long long)st.n_draft_tokens,
                  (unsigned long long)st.n_accepted_draft_tokens);
    }
  }
}

TEST(GoldenV3Mtp, SpeculationAmongOthersAndUnderPreemption) {
  const auto plain = load(kModel);
  const auto model = load(kModel, drafting());
  auto all = greedy_requests();
  ASSERT_EQ(all.size(), 5u);
  const auto others = varied_requests(30, 29, model->info().vocab_size);
  all.insert(all.end(), others.begin(), others.end());
  EngineOptions tight = options(DType::BF16, 96, 16);
  tight.kv_cache_memory_bytes = kv_budget_for_tokens(*plain, tight, 1000);
  const auto expected = run_to_completion(*make_core(*plain, tight), all);
  tight = with_mtp(tight, 3);
  tight.kv_cache_memory_bytes = kv_budget_for_tokens(*model, tight, 1000);
  auto core = make_core(*model, tight);
  const auto together = run_to_completion(*core, all);
  const EngineStats st = core->stats();
  EXPECT_GT(st.n_preemptions, 0u);
  EXPECT_GT(st.n_draft_tokens, 0u);
  std::printf("%s, among 30 others: %llu preemptions, %llu MTP drafts, %llu accepted\n", kModel,
              (unsigned long long)st.n_preemptions, (unsigned long long)st.n_draft_tokens,
              (unsigned long long)st.n_accepted_draft_tokens);
  expect_same_outputs(expected, together, "tiny-v3-mtp, mtp among 30 others with preemption");
}

}  // namespace
}  // namespace deepinfer::test
