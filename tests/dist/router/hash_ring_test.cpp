// HashRing: keys spread over members; when one leaves (removed, or skipped as ineligible) only
// its keys move, and they come back when it returns.
#include "dist/router/hash_ring.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

namespace deepinfer::router {
namespace {

const std::vector<std::string> kMembers = {"http://127.0.0.1:8001", "http://127.0.0.1:8002", "http://127.0.0.1:8003",
                                           "http://127.0.0.1:8004"};

std::vector<uint64_t> keys(size_t n) {
  std::mt19937_64 rng(7);
  std::vector<uint64_t> out(n);
  for (auto& k : out) k = rng();
  return out;
}

TEST(HashRing, EmptyRingPicksNothing) {
  HashRing ring;
  EXPECT_FALSE(ring.pick(42).has_value());
}

TEST(HashRing, SpreadsKeysOverMembers) {
  HashRing ring(128);
  for (const auto& m : kMembers) ring.add(m);
  std::map<std::string, int> count;
  const auto ks = keys(20000);
  for (uint64_t k : ks) ++count[*ring.pick(k)];
  ASSERT_EQ(count.size(), kMembers.size());
  for (const auto& [m, n] : count) {  // each near 1/4 of the keys
    EXPECT_GT(n, 20000 / 4 * 0.75) << m;
    EXPECT_LT(n, 20000 / 4 * 1.25) << m;
  }
}

TEST(HashRing, OnlyTheLeavingMembersKeysMove) {
  HashRing ring(128);
  for (const auto& m : kMembers) ring.add(m);
  const auto ks = keys(5000);
  std::vector<std::string> before;
  for (uint64_t k : ks) before.push_back(*ring.pick(k));

  const std::string gone = kMembers[1];
  HashRing smaller(128);
  for (const auto& m : kMembers)
    if (m != gone) smaller.add(m);
  auto eligible = [&](const std::string& m) { return m != gone; };
  size_t moved = 0;
  for (size_t i = 0; i < ks.size(); ++i) {
    const std::string skipped = *ring.pick(ks[i], eligible);
    EXPECT_EQ(skipped, *smaller.pick(ks[i]));  // skipping a member is removing it
    if (before[i] == gone) {
      EXPECT_NE(skipped, gone);
      ++moved;
    } else {
      EXPECT_EQ(skipped, before[i]);  // everyone else's keys stay
    }
  }
  EXPECT_GT(moved, 0u);
  ring.remove(gone);
  for (size_t i = 0; i < ks.size(); ++i) EXPECT_EQ(*ring.pick(ks[i]), *smaller.pick(ks[i]));
  ring.add(gone);  // it comes back: so do its keys
  for (size_t i = 0; i < ks.size(); ++i) EXPECT_EQ(*ring.pick(ks[i]), before[i]);
}

TEST(HashRing, NoEligibleMemberPicksNothing) {
  HashRing ring;
  for (const auto& m : kMembers) ring.add(m);
  EXPECT_FALSE(ring.pick(1, [](const std::string&) { return false; }).has_value());
  EXPECT_EQ(*ring.pick(1, [](const std::string& m) { return m == kMembers[2]; }), kMembers[2]);
}

TEST(HashRing, AddAndRemoveAreIdempotent) {
  HashRing ring(16);
  ring.add("a");
  ring.add("a");
  ring.add("b");
  EXPECT_EQ(ring.n_members(), 2u);
  ring.remove("a");
  ring.remove("a");
  EXPECT_EQ(ring.n_members(), 1u);
  for (uint64_t k : keys(100)) EXPECT_EQ(*ring.pick(k), "b");
}

}  // namespace
}  // namespace deepinfer::router
