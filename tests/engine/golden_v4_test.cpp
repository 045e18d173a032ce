// The engine on DeepSeek-V4 (tests/data/models/tiny-v4, tiny-v4-fp8, copied from the shared
// fixtures; golden.json from DeepSeek's inference/model.py and transformers'
// DeepseekV4ForCausalLM in float32, which agree to 1e-5): golden ids and logprobs with an f32
// cache; the same ids with the default bf16 cache; bitwise the same outputs at chunk sizes that
// cut compression groups anywhere, from a warm prefix cache at every block boundary, among other
// requests and under preemption.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "engine/engine_core.h"
#include "engine_test_util.h"
#include "golden_cases.h"
#include "model/loader.h"

namespace deepinfer::test {
namespace {


class GoldenV4 : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenV4, F32CacheMatchesTheReferenceAndBf16CacheTheIds) {
  const auto cases = load_golden(GetParam());
  const auto model = load(GetParam());
  const auto requests = golden_requests(cases);
  const double err = golden_error(cases, run_alone(*model, options(DType::F32, 2048), requests), true);
  std::printf("%s: max |logprob - golden| with an f32 KV cache: %.2e\n", GetParam().c_str(), err);
  EXPECT_LT(err, 1e-3);
  golden_error(cases, run_alone(*model, options(DType::BF16, 2048), requests), false);
}

// Chunk sizes 1, 3, 5, 7 and 64 cut the ratio-4 and ratio-128 groups and the 16-token window at
// every offset; block size 16 gives prefix hits at every block boundary of the warm run.
TEST_P(GoldenV4, ChunkedPrefillAndPrefixCacheAreBitwiseTheSame) {
  const auto model = load(GetParam());
  const auto requests = golden_requests(load_golden(GetParam()));
  const auto alone = run_alone(*model, options(DType::F32, 2048), requests);
  for (int chunk : {1, 3, 5, 7, 64}) {
    auto core = make_core(*model, options(DType::F32, chunk, 16));
    const std::string what = GetParam() + ", together, chunk " + std::to_string(chunk);
    expect_same_outputs(alone, run_to_completion(*core, requests), what.c_str());
    expect_same_outputs(alone, run_to_completion(*core, requests, 100), (what + ", warm prefix cache").c_str());
    EXPECT_GT(core->stats().n_prefix_hit_tokens, 100u) << what;
  }
}

// The golden cases among 40 other requests (sampled, n > 1, shared prefixes), in a cache small
// enough to preempt, with the default bf16 cache.
TEST_P(GoldenV4, BatchInvariantAmongOthersAndUnderPreemption) {
  const auto model = load(GetParam());
  const auto requests = golden_requests(load_golden(GetParam()));
  const auto alone = run_alone(*model, options(DType::BF16, 2048), requests);
  auto all = requests;
  const auto others = varied_requests(40, 17, model->info().vocab_size);
  all.insert(all.end(), others.begin(), others.end());
  EngineOptions tight = options(DType::BF16, 96, 16);
  tight.kv_cache_memory_bytes = kv_budget_for_tokens(*model, tight, 1400);
  auto core = make_core(*model, tight);
  auto together = run_to_completion(*core, all);
  EXPECT_GT(core->stats().n_preemptions, 0u);
  together.resize(requests.size());
  expect_same_outputs(alone, together, (GetParam() + ", among 40 others with preemption").c_str());
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenV4, ::testing::Values("tiny-v4", "tiny-v4-fp8"));

}  // namespace
}  // namespace deepinfer::test
