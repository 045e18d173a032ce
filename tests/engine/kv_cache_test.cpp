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

TEST(KvCache, SizedInWholeBlocksFromTheBudget) {
  const MlaCacheLayout layout{DType::F8_E4M3, 512, 64};
  const size_t block_bytes = 656 * 3 * 64;  // 3 layers
  auto cache = KvCache::create(layout, 3, 64, 10 * block_bytes + block_bytes / 2);
  ASSERT_TRUE(cache.ok()) << cache.status().message();
  const KvCacheInfo& info = (*cache)->info();
  EXPECT_EQ(info.n_blocks, 10);
  EXPECT_EQ(info.n_tokens(), 640u);
  EXPECT_EQ(info.bytes_per_token(), 656u * 3);
  EXPECT_EQ(info.bytes(), 10 * block_bytes);
  EXPECT_NE(info.describe().find("10 blocks x 64 tokens = 640 tokens, fp8, 656 B/token/layer x 3 layers"),
            std::string::npos)
      << info.describe();
  const KvCacheView& view = (*cache)->view();
  ASSERT_EQ(view.layer_base.size(), 3u);
  EXPECT_EQ(size_t(view.layer_base[1] - view.layer_base[0]), 10 * 64 * 656u);
  EXPECT_EQ(view.num_blocks, 10);
  EXPECT_EQ(view.block_size, 64);
}

TEST(KvCache, TooSmallABudgetIsAnError) {
  auto cache = KvCache::create({DType::BF16, 512, 64}, 2, 64, 1000);
  ASSERT_FALSE(cache.ok());
  EXPECT_NE(cache.status().message().find("holds no block"), std::string::npos);
}

TEST(KvCache, CopiesBlocksInEveryLayerInOrder) {
  auto cache = KvCache::create({DType::F32, 2, 2}, 2, 2, 4 * 2 * 2 * 16);  // 4 blocks
  ASSERT_TRUE(cache.ok());
  const KvCacheView& v = (*cache)->view();
  const size_t block_bytes = 2 * 16;
  for (int l = 0; l < 2; ++l) {
    for (int b = 0; b < 4; ++b) std::memset(v.layer_base[size_t(l)] + size_t(b) * block_bytes, 10 * l + b, block_bytes);
  }
  const std::vector<BlockCopy> copies = {{1, 3}, {3, 0}};  // the second reads the first's result
  (*cache)->copy_blocks(copies);
  for (int l = 0; l < 2; ++l) {
    EXPECT_EQ(v.layer_base[size_t(l)][3 * block_bytes], 10 * l + 1);
    EXPECT_EQ(v.layer_base[size_t(l)][0], 10 * l + 1);
    EXPECT_EQ(v.layer_base[size_t(l)][2 * block_bytes + 5], 10 * l + 2);
  }
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
