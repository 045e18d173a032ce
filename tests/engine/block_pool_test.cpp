#include "engine/block_pool.h"

#include <gtest/gtest.h>

#include <random>

namespace deepinfer {
namespace {

BlockKey key(uint64_t v) { return {BlockHash{v, ~v}, 0}; }

TEST(BlockPool, AllocatesInQueueOrderAndCountsFree) {
  BlockPool pool(4);
  std::vector<int32_t> got;
  pool.allocate(3, got);
  EXPECT_EQ(got, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(pool.n_free(), 1);
  for (int32_t b : got) EXPECT_EQ(pool.ref_count(b), 1);
  pool.check_invariants();
}

TEST(BlockPool, UnfiledBlocksAreReusedFirstFiledOnesLast) {
  BlockPool pool(4);
  std::vector<int32_t> got;
  pool.allocate(4, got);
  ASSERT_TRUE(pool.file(1, key(1)));
  pool.unref(1);  // filed: tail
  pool.unref(2);  // unfiled: head
  pool.unref(0);  // unfiled: head
  pool.check_invariants();
  std::vector<int32_t> again;
  pool.allocate(3, again);
  EXPECT_EQ(again, (std::vector<int32_t>{0, 2, 1}));
  EXPECT_FALSE(pool.find(key(1)).has_value()) << "allocating a filed block evicts it";
  pool.check_invariants();
}

TEST(BlockPool, FiledBlocksAreEvictedLeastRecentlyReleasedFirst) {
  BlockPool pool(3);
  std::vector<int32_t> got;
  pool.allocate(3, got);
  for (int32_t b : got) ASSERT_TRUE(pool.file(b, key(uint64_t(b) + 10)));
  pool.unref(2);
  pool.unref(0);
  pool.unref(1);
  std::vector<int32_t> again;
  EXPECT_EQ(pool.allocate(2, again), 2);
  EXPECT_EQ(again, (std::vector<int32_t>{2, 0}));
  EXPECT_EQ(pool.find(key(11)), std::optional<int32_t>(1));
}

TEST(BlockPool, RefOnAFreeFiledBlockRevivesIt) {
  BlockPool pool(2);
  std::vector<int32_t> got;
  pool.allocate(2, got);
  ASSERT_TRUE(pool.file(0, key(7)));
  pool.unref(0);
  EXPECT_EQ(pool.n_free(), 1);
  const auto b = pool.find(key(7));
  ASSERT_TRUE(b.has_value());
  pool.ref(*b);
  EXPECT_EQ(pool.n_free(), 0);
  EXPECT_EQ(pool.ref_count(0), 1);
  pool.ref(0);  // shared by a second sequence
  EXPECT_EQ(pool.ref_count(0), 2);
  pool.check_invariants();
}

TEST(BlockPool, AKeyIsFiledOnce) {
  BlockPool pool(2);
  std::vector<int32_t> got;
  pool.allocate(2, got);
  EXPECT_TRUE(pool.file(0, key(5)));
  EXPECT_FALSE(pool.file(1, key(5)));
  EXPECT_FALSE(pool.is_filed(1));
  EXPECT_TRUE(pool.file(1, {key(5).hash, 1})) << "another kind files the same tokens separately";
  EXPECT_EQ(pool.n_filed(), 2);
  pool.check_invariants();
}

TEST(BlockPool, RandomOperationsKeepInvariants) {
  std::mt19937 rng(7);
  BlockPool pool(32);
  std::vector<int32_t> held;  // one entry per reference
  uint64_t next_key = 0;
  for (int i = 0; i < 20000; ++i) {
    const int op = int(rng() % 4);
    if (op == 0 && pool.n_free() > 0) {
      pool.allocate(1 + int(rng() % uint32_t(pool.n_free())), held);
    } else if (op == 1 && !held.empty()) {
      const size_t j = rng() % held.size();
      pool.unref(held[j]);
      held.erase(held.begin() + ptrdiff_t(j));
    } else if (op == 2 && !held.empty()) {
      const int32_t b = held[rng() % held.size()];
      if (!pool.is_filed(b)) pool.file(b, key(next_key++ % 40));
    } else if (op == 3) {
      if (auto b = pool.find(key(rng() % 40))) {
        pool.ref(*b);
        held.push_back(*b);
      }
    }
    if (i % 97 == 0) pool.check_invariants();
  }
  pool.check_invariants();
  for (int32_t b : held) pool.unref(b);
  EXPECT_EQ(pool.n_free(), 32);
  pool.check_invariants();
}

}  // namespace
}  // namespace deepinfer
