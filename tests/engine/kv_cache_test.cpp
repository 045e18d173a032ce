#include "engine/kv_cache.h"

#include <gtest/gtest.h>

#include <cstring>

namespace deepinfer {
namespace {

TEST(KvCache, BytesPerTokenAtDeepSeekV3Sizes) {
  EXPECT_EQ((MlaCacheLayout{DType::BF16, 512, 64}.bytes_per_token()), 1152u);
  EXPECT_EQ((MlaCacheLayout{DType::F8_E4M3, 512, 64}.bytes_per_token()), 656u);
  EXPECT_EQ((MlaCacheLayout{DType::F32, 512, 64}.bytes_per_token()), 2304u);
}

// DeepSeek-V3's one kind: a slab per layer, 64 tokens of 656 B (fp8) per block.
KvKindSpec latent(int n_layers, size_t bytes_per_token, int block_size = 64) {
  return {"latent", n_layers, bytes_per_token * size_t(block_size), 0};
}

TEST(KvCache, SizedInWholeBlocksFromTheBudget) {
  const size_t block_bytes = 656 * 3 * 64;  // 3 layers
  auto n = kv_blocks_for_budget({latent(3, 656)}, 64, 10 * block_bytes + block_bytes / 2, 8, 512);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(*n, std::vector<int>{10});
  auto cache = KvCache::create({latent(3, 656)}, *n, DType::F8_E4M3, 64);
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  const KvCacheInfo& info = (*cache)->info();
  EXPECT_EQ(info.n_tokens(), 640u);
  EXPECT_DOUBLE_EQ(info.bytes_per_token(), 656.0 * 3);
  EXPECT_EQ(info.bytes_per_sequence_window(), 0u);
  EXPECT_EQ(info.bytes(), 10 * block_bytes);
  EXPECT_NE(info.describe().find("latent 10 blocks of 41984 B x 3 slabs; 1968.0 B/token, 640 tokens"), std::string::npos)
      << info.describe();
  const KvCacheView& view = (*cache)->view();
  ASSERT_EQ(view.kinds.size(), 1u);
  ASSERT_EQ(view.kinds[0].slab_base.size(), 3u);
  EXPECT_EQ(size_t(view.kinds[0].slab_base[1] - view.kinds[0].slab_base[0]), 10 * 64 * 656u);
  EXPECT_EQ(view.kinds[0].n_blocks, 10);
  EXPECT_EQ(view.block_size, 64);
  EXPECT_EQ(view.dtype, DType::F8_E4M3);
}

// A window kind gets what max_num_seqs sequences hold at once (lookback 127 at 64-token blocks:
// 2 blocks + 2, for 4 sequences, plus 512 / 64 blocks of prefill) up to half the budget, the full
// kind the rest; a smaller budget gives the window fewer blocks, never less than one sequence's.
TEST(KvCache, WindowKindsGetTheirSequencesShareAndFullKindsTheRest) {
  const KvKindSpec window{"window", 1, 1000, 127}, compressed{"compressed", 1, 300, 0};
  auto n = kv_blocks_for_budget({window, compressed}, 64, 24 * 1000 + 300 * 100 + 299, 4, 512);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(*n, (std::vector<int>{24, 100}));
  auto capped = kv_blocks_for_budget({window, compressed}, 64, 40000, 4, 512);
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(*capped, (std::vector<int>{20, 66}));  // 24 x 20000 / 24000 blocks; (40000 - 20000) / 300
  auto least = kv_blocks_for_budget({window, compressed}, 64, 20000, 4, 512);
  ASSERT_TRUE(least.ok());
  EXPECT_EQ(*least, (std::vector<int>{12, 26}));  // one sequence's 4 + 8 blocks
  auto small = kv_blocks_for_budget({window, compressed}, 64, 12299, 4, 512);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("beside one sequence's windows"), std::string::npos)
      << small.status().message();
  auto cache = KvCache::create({window, compressed}, *n, DType::BF16, 64);
  ASSERT_TRUE(cache.ok());
  EXPECT_DOUBLE_EQ((*cache)->info().bytes_per_token(), 300.0 / 64);
  EXPECT_EQ((*cache)->info().bytes_per_sequence_window(), 3u * 1000u);  // blocks of 127 positions and the one written
  EXPECT_EQ((*cache)->info().n_tokens(), 100u * 64u);
}

TEST(KvCache, TooSmallABudgetIsAnError) {
  auto n = kv_blocks_for_budget({latent(2, 1152)}, 64, 1000, 8, 512);
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("holds no block"), std::string::npos);
}

TEST(KvCache, CopiesBlocksOfTheirKindInEverySlabInOrder) {
  auto cache = KvCache::create({latent(2, 16, 2), {"other", 1, 8, 3}}, {4, 4}, DType::F32, 2);  // 4 blocks each
  ASSERT_TRUE(cache.ok());
  const KvCacheView& v = (*cache)->view();
  const size_t block_bytes = 2 * 16;
  for (int l = 0; l < 2; ++l) {
    for (int b = 0; b < 4; ++b) std::memset(v.kinds[0].block(l, b), 10 * l + b, block_bytes);
  }
  for (int b = 0; b < 4; ++b) std::memset(v.kinds[1].block(0, b), 50 + b, 8);
  const std::vector<BlockCopy> copies = {{0, 1, 3}, {0, 3, 0}, {1, 2, 1}};  // the second reads the first's result
  (*cache)->copy_blocks(copies);
  for (int l = 0; l < 2; ++l) {
    EXPECT_EQ(v.kinds[0].block(l, 3)[0], 10 * l + 1);
    EXPECT_EQ(v.kinds[0].block(l, 0)[0], 10 * l + 1);
    EXPECT_EQ(v.kinds[0].block(l, 2)[5], 10 * l + 2);
  }
  EXPECT_EQ(v.kinds[1].block(0, 1)[7], 52);
  EXPECT_EQ(v.kinds[1].block(0, 3)[0], 53);  // the other kind's copies touch only their kind
}

TEST(KvCache, DtypeNames) {
  EXPECT_EQ(parse_kv_cache_dtype("bf16"), DType::BF16);
  EXPECT_EQ(parse_kv_cache_dtype("auto"), DType::BF16);
  EXPECT_EQ(parse_kv_cache_dtype("fp8"), DType::F8_E4M3);
  EXPECT_EQ(parse_kv_cache_dtype("fp8_e4m3"), DType::F8_E4M3);
  EXPECT_EQ(parse_kv_cache_dtype("f32"), DType::F32);
  EXPECT_FALSE(parse_kv_cache_dtype("int4").has_value());
  EXPECT_EQ(kv_cache_dtype_name(DType::F8_E4M3), "fp8");
}

}  // namespace
}  // namespace deepinfer
