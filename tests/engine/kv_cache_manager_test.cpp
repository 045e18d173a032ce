// The prefix cache and block accounting of KvCacheManager, without a scheduler.
#include "engine/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <numeric>

#include "engine/latent_kind.h"

namespace deepinfer {
namespace {

constexpr int kBlock = 4;

std::vector<std::unique_ptr<KvKind>> kinds(int n) {
  std::vector<std::unique_ptr<KvKind>> k;
  for (int i = 0; i < n; ++i) k.push_back(std::make_unique<LatentKind>(kBlock));
  return k;
}

std::vector<int32_t> iota_tokens(int n, int first = 100) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

Sequence make_seq(int64_t id, std::vector<int32_t> tokens, int n_kinds = 1) {
  return Sequence(id, uint64_t(id), 0, 0, uint64_t(id), std::move(tokens), n_kinds, 0);
}

// Admits seq with its prefix hit and computes all of its tokens; returns the hit.
int admit_and_compute(KvCacheManager& kv, Sequence& seq) {
  const int hit = kv.n_prefix_hit_tokens(seq);
  EXPECT_TRUE(kv.admit(seq, hit, seq.n_tokens() - hit));
  seq.set_n_computed(seq.n_tokens());
  kv.file_computed_blocks(seq);
  return hit;
}

TEST(PrefixCache, ReusesFullBlocksButRecomputesTheLastToken) {
  KvCacheManager kv(16, kBlock, kinds(1), true);
  Sequence a = make_seq(0, iota_tokens(8));  // exactly two full blocks
  EXPECT_EQ(admit_and_compute(kv, a), 0);
  Sequence b = make_seq(1, iota_tokens(8));
  EXPECT_EQ(admit_and_compute(kv, b), 4) << "the last block holds the last token: recomputed";
  EXPECT_EQ(b.block_tables()[0][0], a.block_tables()[0][0]);
  EXPECT_NE(b.block_tables()[0][1], a.block_tables()[0][1]);
  EXPECT_EQ(kv.pool().ref_count(a.block_tables()[0][0]), 2);
  Sequence c = make_seq(2, iota_tokens(11));
  EXPECT_EQ(admit_and_compute(kv, c), 8);
  EXPECT_EQ(kv.prefix_stats().n_query_tokens, 27u);
  EXPECT_EQ(kv.prefix_stats().n_hit_tokens, 12u);
  kv.pool().check_invariants();
}

TEST(PrefixCache, HashesAreChainedOverThePrefix) {
  KvCacheManager kv(16, kBlock, kinds(1), true);
  Sequence a = make_seq(0, iota_tokens(9));
  admit_and_compute(kv, a);
  auto other = iota_tokens(9);
  other[0] = 7;  // the second block's tokens are equal, its prefix is not
  Sequence b = make_seq(1, other);
  EXPECT_EQ(kv.n_prefix_hit_tokens(b), 0);
}

TEST(PrefixCache, ABlockIsOnlyReusedAfterTheSamePrefix) {
  // b's second block has the tokens of c's second block, after a different first block: its KV
  // (computed over a different prefix) must not be reused.
  KvCacheManager kv(16, kBlock, kinds(1), true);
  const std::vector<int32_t> x = {1, 2, 3, 4}, z = {5, 6, 7, 8}, w = {9, 10, 11, 12};
  auto cat = [](std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    a.push_back(0);
    return a;
  };
  Sequence a = make_seq(0, cat(x, z));
  Sequence c = make_seq(1, cat(z, w));
  admit_and_compute(kv, a);
  admit_and_compute(kv, c);
  Sequence b = make_seq(2, cat(x, w));
  EXPECT_EQ(kv.n_prefix_hit_tokens(b), 4);
}

TEST(PrefixCache, PartialBlocksAreNotCached) {
  KvCacheManager kv(16, kBlock, kinds(1), true);
  Sequence a = make_seq(0, iota_tokens(7));
  admit_and_compute(kv, a);
  EXPECT_EQ(kv.pool().n_filed(), 1);
  Sequence b = make_seq(1, iota_tokens(12));
  EXPECT_EQ(kv.n_prefix_hit_tokens(b), 4);
}

TEST(PrefixCache, FreedBlocksStayCachedUntilEvictedTailFirst) {
  KvCacheManager kv(4, kBlock, kinds(1), true);
  Sequence a = make_seq(0, iota_tokens(13));  // three full blocks and one token
  admit_and_compute(kv, a);
  kv.free(a);
  EXPECT_EQ(kv.pool().n_free(), 4);
  EXPECT_EQ(kv.pool().n_filed(), 3);
  // A different 5-token sequence takes two blocks: the unfiled one, then a's last full block.
  Sequence b = make_seq(1, iota_tokens(5, 500));
  admit_and_compute(kv, b);
  EXPECT_EQ(kv.prefix_stats().n_evicted_blocks, 1u);
  Sequence c = make_seq(2, iota_tokens(13));
  EXPECT_EQ(kv.n_prefix_hit_tokens(c), 8) << "a's head survives its tail";
}

TEST(PrefixCache, DisabledMeansNoHits) {
  KvCacheManager kv(16, kBlock, kinds(1), false);
  Sequence a = make_seq(0, iota_tokens(9));
  admit_and_compute(kv, a);
  Sequence b = make_seq(1, iota_tokens(9));
  EXPECT_EQ(kv.n_prefix_hit_tokens(b), 0);
  EXPECT_EQ(kv.pool().n_filed(), 0);
}

TEST(KvCacheManager, AdmitFailsWithoutChangingAnything) {
  KvCacheManager kv(3, kBlock, kinds(1), true);
  Sequence a = make_seq(0, iota_tokens(8));
  admit_and_compute(kv, a);
  kv.free(a);  // two filed free blocks, one unfiled
  Sequence b = make_seq(1, iota_tokens(17));
  const int hit = kv.n_prefix_hit_tokens(b);
  EXPECT_EQ(hit, 8);
  EXPECT_FALSE(kv.admit(b, hit, 9)) << "needs 3 more blocks beyond the 2 it revives; 1 is left";
  EXPECT_TRUE(b.block_tables()[0].empty());
  EXPECT_EQ(kv.pool().n_free(), 3);
  EXPECT_EQ(kv.prefix_stats().n_query_tokens, 8u);
  EXPECT_TRUE(kv.admit(b, hit, 4));
  EXPECT_EQ(b.n_computed(), 8);
  EXPECT_EQ(kv.pool().n_free(), 0);
  kv.pool().check_invariants();
}

TEST(KvCacheManager, AllocateGrowsTablesOnBlockBoundaries) {
  KvCacheManager kv(8, kBlock, kinds(1), true);
  Sequence a = make_seq(0, iota_tokens(20));
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.admit(a, 0, 3));
  EXPECT_EQ(a.block_tables()[0].size(), 1u);
  a.set_n_computed(3);
  ASSERT_TRUE(kv.allocate(a, 1, copies));
  EXPECT_EQ(a.block_tables()[0].size(), 1u);
  a.set_n_computed(4);
  ASSERT_TRUE(kv.allocate(a, 9, copies));
  EXPECT_EQ(a.block_tables()[0].size(), 4u);
  EXPECT_TRUE(copies.empty());
  a.set_n_computed(13);
  Sequence b = make_seq(1, iota_tokens(16, 300));
  ASSERT_TRUE(kv.admit(b, 0, 16));
  EXPECT_FALSE(kv.allocate(a, 7, copies)) << "a fifth block for a is not there";
  EXPECT_EQ(a.block_tables()[0].size(), 4u);
  EXPECT_TRUE(kv.allocate(a, 3, copies));
  EXPECT_EQ(kv.max_tokens_per_sequence(), 32);
}

TEST(KvCacheManager, ForkedSamplesCopyASharedPartialBlockOnWrite) {
  KvCacheManager kv(8, kBlock, kinds(1), true);
  Sequence parent(0, 0, 0, 0, 0, iota_tokens(6), 1, 2);
  ASSERT_TRUE(kv.admit(parent, 0, 6));
  parent.set_n_computed(6);
  kv.file_computed_blocks(parent);
  parent.set_state(SequenceState::kRunning);
  Sequence c1 = parent.fork(1, 1), c2 = parent.fork(2, 2);
  kv.fork(parent, c1);
  kv.fork(parent, c2);
  const int32_t full = parent.block_tables()[0][0], tail = parent.block_tables()[0][1];
  EXPECT_EQ(kv.pool().ref_count(full), 3);
  EXPECT_EQ(kv.pool().ref_count(tail), 3);
  for (Sequence* s : {&parent, &c1, &c2}) s->append_token(int32_t(s->sample_index()));
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.allocate(c1, 1, copies));
  ASSERT_TRUE(kv.allocate(parent, 1, copies));
  ASSERT_TRUE(kv.allocate(c2, 1, copies));  // the last holder writes in place
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].src, tail);
  EXPECT_EQ(copies[1].src, tail);
  EXPECT_EQ(c1.block_tables()[0][1], copies[0].dst);
  EXPECT_EQ(parent.block_tables()[0][1], copies[1].dst);
  EXPECT_EQ(c2.block_tables()[0][1], tail);
  EXPECT_EQ(kv.pool().ref_count(tail), 1);
  EXPECT_EQ(kv.pool().ref_count(full), 3);
  kv.pool().check_invariants();
}

TEST(KvCacheManager, EveryKindKeepsItsOwnBlocksAndEntries) {
  KvCacheManager kv(10, kBlock, kinds(2), true);
  EXPECT_EQ(kv.max_tokens_per_sequence(), 20);
  Sequence a = make_seq(0, iota_tokens(9), 2);
  admit_and_compute(kv, a);
  EXPECT_EQ(kv.pool().n_free(), 4);
  EXPECT_EQ(kv.pool().n_filed(), 4);
  Sequence b = make_seq(1, iota_tokens(9), 2);
  EXPECT_EQ(admit_and_compute(kv, b), 8);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(b.block_tables()[size_t(k)][0], a.block_tables()[size_t(k)][0]);
    EXPECT_EQ(b.block_tables()[size_t(k)][1], a.block_tables()[size_t(k)][1]);
  }
  EXPECT_NE(a.block_tables()[0][0], a.block_tables()[1][0]);
  kv.free(a);
  kv.free(b);
  EXPECT_EQ(kv.pool().n_free(), 10);
  kv.pool().check_invariants();
}

}  // namespace
}  // namespace deepinfer
