// The prefix cache and block accounting of KvCacheManager, without a scheduler.
#include "engine/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>


namespace deepinfer {
namespace {

constexpr int kBlock = 4;

// n kinds that keep every block, each with a pool of n_blocks.
std::vector<KvKindBlocks> kinds(int n, int n_blocks) { return std::vector<KvKindBlocks>(size_t(n), {0, n_blocks}); }

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
  KvCacheManager kv(kBlock, kinds(1, 16), true);
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
  KvCacheManager kv(kBlock, kinds(1, 16), true);
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
  KvCacheManager kv(kBlock, kinds(1, 16), true);
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
  KvCacheManager kv(kBlock, kinds(1, 16), true);
  Sequence a = make_seq(0, iota_tokens(7));
  admit_and_compute(kv, a);
  EXPECT_EQ(kv.pool().n_filed(), 1);
  Sequence b = make_seq(1, iota_tokens(12));
  EXPECT_EQ(kv.n_prefix_hit_tokens(b), 4);
}

TEST(PrefixCache, FreedBlocksStayCachedUntilEvictedTailFirst) {
  KvCacheManager kv(kBlock, kinds(1, 4), true);
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
  KvCacheManager kv(kBlock, kinds(1, 16), false);
  Sequence a = make_seq(0, iota_tokens(9));
  admit_and_compute(kv, a);
  Sequence b = make_seq(1, iota_tokens(9));
  EXPECT_EQ(kv.n_prefix_hit_tokens(b), 0);
  EXPECT_EQ(kv.pool().n_filed(), 0);
}

// A sequence of prompt `prompt` that generated `generated`, all computed and filed.
Sequence generate_and_compute(KvCacheManager& kv, int64_t id, std::vector<int32_t> prompt,
                              const std::vector<int32_t>& generated) {
  Sequence s = make_seq(id, std::move(prompt));
  admit_and_compute(kv, s);
  std::vector<BlockCopy> copies;
  for (const int32_t t : generated) {
    s.append_token(t);
    EXPECT_TRUE(kv.allocate(s, 1, copies));
    s.set_n_computed(s.n_tokens());
    kv.file_computed_blocks(s);
  }
  return s;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(PrefixCache, WithProvenanceAGeneratedBlockNeverHitsAPromptLookup) {
  // 6 prompt tokens, then 6 generated: block 1 holds 2 prompt and 2 generated tokens, block 2
  // only generated ones. A new prompt of the same 12 tokens (+1) hits only block 0.
  KvCacheManager kv(kBlock, kinds(1, 16), true, /*hash_provenance=*/true);
  const auto prompt = iota_tokens(6), answer = iota_tokens(6, 300);
  generate_and_compute(kv, 0, prompt, answer);
  EXPECT_EQ(kv.pool().n_filed(), 3);
  Sequence again = make_seq(1, concat(concat(prompt, answer), {7}));
  EXPECT_EQ(kv.n_prefix_hit_tokens(again), 4);
}

TEST(PrefixCache, WithoutProvenanceGeneratedBlocksHitAsBefore) {
  KvCacheManager kv(kBlock, kinds(1, 16), true);
  const auto prompt = iota_tokens(6), answer = iota_tokens(6, 300);
  generate_and_compute(kv, 0, prompt, answer);
  Sequence again = make_seq(1, concat(concat(prompt, answer), {7}));
  EXPECT_EQ(kv.n_prefix_hit_tokens(again), 12);
}

TEST(PrefixCache, ASecondTurnHitsOnlyThePromptBlocksOfTheFirst) {
  // Turn 1: an 8-token prompt (two whole prompt blocks) and a 5-token answer. Turn 2's prompt is
  // turn 1's tokens and a new message: the two prompt blocks hit; the answer is computed again as
  // prompt, and once filed, a third turn repeating it hits turn 2's blocks.
  KvCacheManager kv(kBlock, kinds(1, 32), true, /*hash_provenance=*/true);
  const auto prompt = iota_tokens(8), answer = iota_tokens(5, 300), message = iota_tokens(6, 600);
  Sequence turn1 = generate_and_compute(kv, 0, prompt, answer);
  Sequence turn2 = make_seq(1, concat(concat(prompt, answer), message));
  EXPECT_EQ(admit_and_compute(kv, turn2), 8);
  Sequence turn3 = make_seq(2, concat(concat(concat(prompt, answer), message), {9, 9}));
  EXPECT_EQ(kv.n_prefix_hit_tokens(turn3), 16) << "turn 2's whole prompt blocks, the answer among them";
}

TEST(PrefixCache, APreemptedSequenceFindsItsOwnGeneratedBlocks) {
  KvCacheManager kv(kBlock, kinds(1, 16), true, /*hash_provenance=*/true);
  Sequence s = generate_and_compute(kv, 0, iota_tokens(6), iota_tokens(7, 300));
  kv.free(s);  // preempted (as the scheduler does): recomputed from its tokens
  s.set_n_computed(0);
  EXPECT_EQ(kv.n_prefix_hit_tokens(s), 12);
}

TEST(KvCacheManager, AdmitFailsWithoutChangingAnything) {
  KvCacheManager kv(kBlock, kinds(1, 3), true);
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
  KvCacheManager kv(kBlock, kinds(1, 8), true);
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
  KvCacheManager kv(kBlock, kinds(1, 8), true);
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
  KvCacheManager kv(kBlock, kinds(2, 5), true);
  EXPECT_EQ(kv.max_tokens_per_sequence(), 20);
  Sequence a = make_seq(0, iota_tokens(9), 2);
  admit_and_compute(kv, a);
  Sequence b = make_seq(1, iota_tokens(9), 2);
  EXPECT_EQ(admit_and_compute(kv, b), 8);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(kv.pool(k).n_filed(), 2);
    EXPECT_EQ(b.block_tables()[size_t(k)][0], a.block_tables()[size_t(k)][0]);
    EXPECT_EQ(b.block_tables()[size_t(k)][1], a.block_tables()[size_t(k)][1]);
  }
  kv.free(a);
  kv.free(b);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(kv.pool(k).n_free(), 5);
    kv.pool(k).check_invariants();
  }
}

TEST(KvKind, LookbackDecidesWhichBlocksALaterStepReads) {
  const KvKind full(kBlock, 0), window(kBlock, 5);
  EXPECT_EQ(full.first_live_block(100), 0);
  EXPECT_EQ(window.first_live_block(5), 0);
  EXPECT_EQ(window.first_live_block(12), 1);  // positions >= 7
  EXPECT_EQ(window.first_live_block(13), 2);  // positions >= 8
  EXPECT_EQ(window.n_blocks_resident(100), 2);  // the last step reads 94..99: blocks 23, 24
  EXPECT_EQ(full.n_blocks_resident(100), 25);
  // A hit of h blocks needs the window's blocks [first_live_block(4 h), h) filed.
  auto filed = [](std::vector<int> f) { return [f](int i) { return std::count(f.begin(), f.end(), i) > 0; }; };
  EXPECT_EQ(window.n_blocks_hit(5, filed({2, 3, 4})), 5);
  EXPECT_EQ(window.n_blocks_hit(5, filed({1, 2})), 3);
  EXPECT_EQ(window.n_blocks_hit(5, filed({0, 2, 4})), 1);
  EXPECT_EQ(full.n_blocks_hit(5, filed({0, 1, 3, 4})), 2);
}

// A window kind beside a full one: blocks leave the window as the sequence grows and go back to
// the window's pool, filed, so that a later prefix hit can restore a window that is still there;
// once a block the hit needs has been handed out again, the hit stops where the window is whole.
TEST(KvCacheManager, AWindowKindReleasesOldBlocksAndHitsOnlyWhereItsWindowSurvives) {
  KvCacheManager kv(kBlock, {{0, 16}, {5, 6}}, true);
  EXPECT_EQ(kv.max_tokens_per_sequence(), 64);
  const std::vector<int32_t> tokens = iota_tokens(20);
  Sequence a = make_seq(0, tokens, 2);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.admit(a, 0, 4));
  for (int n = 4; n <= 20; n += 4) {  // compute 4 tokens a step
    a.set_n_computed(n);
    kv.file_computed_blocks(a);
    if (n < 20) ASSERT_TRUE(kv.allocate(a, 4, copies));
  }
  EXPECT_TRUE(copies.empty());
  // Computing [16, 20) read positions >= 11: blocks 0 and 1 were released before it.
  const auto& window = a.block_tables()[1];
  ASSERT_EQ(window.size(), 5u);
  EXPECT_EQ(window[0], -1);
  EXPECT_EQ(window[1], -1);
  EXPECT_EQ(kv.pool(1).n_free(), 3);  // one never used, and blocks 0 and 1 of the sequence, still filed
  EXPECT_EQ(kv.pool(0).n_free(), 11);

  Sequence same = make_seq(1, iota_tokens(21), 2);  // a's 20 tokens and one more
  EXPECT_EQ(kv.n_prefix_hit_tokens(same), 20);
  std::vector<int32_t> branch(tokens.begin(), tokens.begin() + 12);  // a's first 12, then others
  for (int i = 0; i < 5; ++i) branch.push_back(900 + i);
  Sequence mid = make_seq(2, branch, 2);
  EXPECT_EQ(kv.n_prefix_hit_tokens(mid), 12);  // its window [7, 12) is blocks 1 and 2
  ASSERT_TRUE(kv.admit(mid, 12, 5));  // takes the unused block and then a's block 0
  EXPECT_EQ(mid.block_tables()[1][0], -1);
  EXPECT_GE(mid.block_tables()[1][1], 0);  // a's block 1, revived
  EXPECT_EQ(mid.block_tables()[1][2], window[2]);
  EXPECT_EQ(mid.block_tables()[0][0], a.block_tables()[0][0]);
  EXPECT_EQ(kv.pool(1).n_free(), 0);
  std::vector<int32_t> early(tokens.begin(), tokens.begin() + 8);  // needs block 0, handed out again
  for (int i = 0; i < 5; ++i) early.push_back(800 + i);
  Sequence low = make_seq(3, early, 2);
  EXPECT_EQ(kv.n_prefix_hit_tokens(low), 0);
  kv.free(a);
  kv.free(mid);
  EXPECT_EQ(kv.pool(0).n_free(), 16);
  EXPECT_EQ(kv.pool(1).n_free(), 6);
  kv.pool(0).check_invariants();
  kv.pool(1).check_invariants();
}

}  // namespace
}  // namespace deepinfer
