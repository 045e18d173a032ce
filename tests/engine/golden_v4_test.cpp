// The engine on DeepSeek-V4 (tests/data/models/tiny-v4, tiny-v4-fp8, copied from the shared
// fixtures; golden.json from DeepSeek's inference/model.py and transformers'
// DeepseekV4ForCausalLM in float32, which agree to 1e-5): golden ids and logprobs with an f32
// cache; the same ids with the default bf16 cache; bitwise the same outputs at chunk sizes that
// cut compression groups anywhere, from a warm prefix cache at every block boundary, among other
// requests and under preemption; and with MTP drafts (--speculative mtp), bitwise plain decoding.
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

// Under bf16 activations with a bf16 or an fp8 cache (the indexer then scores the cached keys,
// Backend::indexer_scores, and the prompts of 45 and 150 tokens select among their entries):
// bitwise the same outputs alone, in chunks of 5 from a warm prefix cache, and among 40 others
// under preemption.
TEST_P(GoldenV4, Bf16ActivationsChunkedCachedAndBatchedAreBitwiseTheSame) {
  ModelOptions bf16;
  bf16.activation_dtype = DType::BF16;
  const auto model = load(GetParam(), bf16);
  const auto requests = golden_requests(load_golden(GetParam()));
  for (DType kv : {DType::BF16, DType::F8_E4M3})
    expect_chunked_cached_and_batched_alike(*model, requests, kv,
                                            GetParam() + ", bf16 activations, " + std::string(dtype_name(kv)) + " cache");
}

EngineOptions with_mtp(EngineOptions o, int k) {
  o.speculative = SpeculativeMethod::kMtp;
  o.num_speculative_tokens = k;
  o.speculative_gate.min_acceptance = 0;  // the fixtures' random drafts are verified at every step
  return o;
}

ModelOptions drafting() {
  ModelOptions o;
  o.mtp_drafting = true;
  return o;
}

// The MTP kinds exist only when the model is loaded for drafting: a window of the block's K=V
// and the last block's streams, reported with the others.
TEST_P(GoldenV4, MtpKindsOnlyWhenDrafting) {
  const auto plain = load(GetParam());
  const auto model = load(GetParam(), drafting());
  EXPECT_FALSE(plain->can_draft());
  ASSERT_TRUE(model->can_draft());
  auto base = plain->kv_kinds(DType::BF16, 16), kinds = model->kv_kinds(DType::BF16, 16);
  ASSERT_TRUE(base.ok() && kinds.ok());
  ASSERT_EQ(kinds->size(), base->size() + 2);
  const KvKindSpec& window = (*kinds)[base->size()];
  const KvKindSpec& streams = (*kinds)[base->size() + 1];
  EXPECT_EQ(window.name, "mtp window 16");  // tiny-v4: sliding_window 16, head_dim 128 (64 rope)
  EXPECT_EQ(window.lookback, 15);
  EXPECT_EQ(window.bytes_per_block, size_t(16) * (128 + 64) * 2);
  EXPECT_EQ(streams.name, "mtp streams");
  EXPECT_EQ(streams.lookback, 1);
  EXPECT_EQ(kv_bytes_per_token(*kinds, 16), kv_bytes_per_token(*base, 16));  // windows only
  auto core = make_core(*model, with_mtp(options(DType::BF16, 2048, 16), 2));
  const std::string described = core->kv_cache_info().describe();
  std::printf("%s: %s\n", GetParam().c_str(), described.c_str());
  EXPECT_NE(described.find("mtp window 16"), std::string::npos) << described;
  EXPECT_NE(described.find("mtp streams"), std::string::npos) << described;
}

// k = 1..4 MTP drafts: every golden output bitwise that of plain decoding (by the model loaded
// without the MTP kinds), alone and all together at chunk sizes that split the prompts anywhere
// and from a warm prefix cache at every 16-token block boundary (chunk 1 leaves no budget for
// drafts). The fixtures' weights are random, so drafts are rarely right: acceptance is counted
// and printed; the verification of accepted drafts is the ngram path's (engine_core_test).
TEST_P(GoldenV4, MtpSpeculationIsBitwisePlainDecoding) {
  const auto plain = load(GetParam());
  const auto model = load(GetParam(), drafting());
  const auto requests = golden_requests(load_golden(GetParam()));
  const auto alone = run_alone(*plain, options(DType::F32, 2048), requests);
  for (int k = 1; k <= 4; ++k) {
    const std::string what = GetParam() + ", mtp k " + std::to_string(k);
    expect_same_outputs(alone, run_alone(*model, with_mtp(options(DType::F32, 2048), k), requests),
                        (what + ", alone").c_str());
    for (int chunk : {1, 7, 64}) {
      auto core = make_core(*model, with_mtp(options(DType::F32, chunk, 16), k));
      const std::string w = what + ", together, chunk " + std::to_string(chunk);
      expect_same_outputs(alone, run_to_completion(*core, requests), w.c_str());
      expect_same_outputs(alone, run_to_completion(*core, requests, 100), (w + ", warm prefix cache").c_str());
      const EngineStats st = core->stats();
      EXPECT_GT(st.n_prefix_hit_tokens, 100u) << w;
      if (chunk == 1) EXPECT_EQ(st.n_draft_tokens, 0u) << w;  // a 1-token budget leaves no room for drafts
      else EXPECT_GT(st.n_draft_tokens, 0u) << w;
      std::printf("%s: %llu MTP drafts, %llu accepted\n", w.c_str(), (unsigned long long)st.n_draft_tokens,
                  (unsigned long long)st.n_accepted_draft_tokens);
    }
  }
}

// The golden cases among 40 others (sampled, n > 1, shared prefixes), bf16 cache small enough
// to preempt, with k = 3 MTP drafts: the outputs of plain decoding.
TEST_P(GoldenV4, MtpSpeculationAmongOthersAndUnderPreemption) {
  const auto plain = load(GetParam());
  const auto model = load(GetParam(), drafting());
  const auto requests = golden_requests(load_golden(GetParam()));
  auto all = requests;
  const auto others = varied_requests(40, 17, model->info().vocab_size);
  all.insert(all.end(), others.begin(), others.end());
  EngineOptions tight = options(DType::BF16, 96, 16);
  tight.kv_cache_memory_bytes = kv_budget_for_tokens(*plain, tight, 1400);
  const auto expected = run_to_completion(*make_core(*plain, tight), all);
  tight = with_mtp(tight, 3);
  tight.speculative_max_batch = 64;  // drafts with all of them decoding
  tight.kv_cache_memory_bytes = kv_budget_for_tokens(*model, tight, 1400);
  auto core = make_core(*model, tight);
  const auto together = run_to_completion(*core, all);
  const EngineStats st = core->stats();
  EXPECT_GT(st.n_preemptions, 0u);
  EXPECT_GT(st.n_draft_tokens, 0u);
  std::printf("%s, among 40 others: %llu preemptions, %llu MTP drafts, %llu accepted\n", GetParam().c_str(),
              (unsigned long long)st.n_preemptions, (unsigned long long)st.n_draft_tokens,
              (unsigned long long)st.n_accepted_draft_tokens);
  expect_same_outputs(expected, together, (GetParam() + ", mtp among 40 others with preemption").c_str());
}

// A model that cannot draft refuses --speculative mtp.
TEST_P(GoldenV4, MtpSpeculationNeedsTheDraftingLoad) {
  const auto plain = load(GetParam());
  auto core = EngineCore::create(*plain, with_mtp(options(DType::BF16, 2048), 2));
  ASSERT_FALSE(core.ok());
  EXPECT_NE(core.status().message().find("--speculative mtp"), std::string::npos) << core.status().message();
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenV4, ::testing::Values("tiny-v4", "tiny-v4-fp8"));

}  // namespace
}  // namespace deepinfer::test
