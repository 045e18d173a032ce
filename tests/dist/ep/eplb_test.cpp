// The EPLB policy (model/eplb.h): balanced packing, copies of the busy experts, groups kept on
// one node, and the load per rank it leaves against the contiguous placement's.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "model/eplb.h"
#include "model/expert_group.h"

namespace deepinfer {
namespace {

// The heaviest rank's load over the mean, with each expert's load split evenly over its copies.
double imbalance(const std::vector<int64_t>& loads, const std::vector<int32_t>& slot_expert,
                 const std::vector<int32_t>& slot_rank, int n_ranks) {
  std::vector<int> copies(loads.size(), 0);
  for (const int32_t e : slot_expert) ++copies[size_t(e)];
  std::vector<double> per_rank(size_t(n_ranks), 0.0);
  for (size_t s = 0; s < slot_expert.size(); ++s)
    per_rank[size_t(slot_rank[s])] += double(loads[size_t(slot_expert[s])]) / copies[size_t(slot_expert[s])];
  const double total = std::accumulate(per_rank.begin(), per_rank.end(), 0.0);
  return *std::max_element(per_rank.begin(), per_rank.end()) / (total / n_ranks);
}

TEST(BalancedPacking, FillsEveryPackExactlyAndEvensTheLoad) {
  const std::vector<double> w = {9, 1, 8, 2, 7, 3, 6, 4};
  const std::vector<int32_t> pack = balanced_packing(w, 2);
  std::vector<double> load(2, 0);
  std::vector<int> count(2, 0);
  for (size_t i = 0; i < w.size(); ++i) {
    load[size_t(pack[i])] += w[i];
    ++count[size_t(pack[i])];
  }
  EXPECT_EQ(count, (std::vector<int>{4, 4}));
  EXPECT_EQ(load[0], 20);
  EXPECT_EQ(load[1], 20);
  // Ties go to the lower index: equal weights fill packs in order.
  EXPECT_EQ(balanced_packing(std::vector<double>(4, 1.0), 2), (std::vector<int32_t>{0, 1, 0, 1}));
}

TEST(Eplb, HotExpertsGetCopiesAndTheRanksEvenOut) {
  // 16 experts over 4 ranks; experts 0-3 (all on rank 0 when contiguous) take almost every token.
  std::vector<int64_t> loads(16, 10);
  for (int e = 0; e < 4; ++e) loads[size_t(e)] = 10000;
  auto contiguous = ExpertPlacement::contiguous(16, 4, 0);
  const double before = imbalance(loads, contiguous->slot_expert, contiguous->slot_rank, 4);
  EXPECT_GT(before, 3.9);
  auto plan = eplb_placement(loads, 20, 4, 1, 1);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  auto p = ExpertPlacement::from_slots(16, 4, 0, plan->slot_expert, plan->slot_rank);
  ASSERT_TRUE(p.ok()) << p.status().message();
  for (int e = 0; e < 4; ++e) EXPECT_EQ(p->replicas[size_t(e)].size(), 2u) << e;
  for (int e = 4; e < 16; ++e) EXPECT_EQ(p->replicas[size_t(e)].size(), 1u) << e;
  for (int r = 0; r < 4; ++r)  // five slots each, contiguous by rank
    for (int s = 0; s < 5; ++s) EXPECT_EQ(plan->slot_rank[size_t(r * 5 + s)], r);
  EXPECT_LT(imbalance(loads, plan->slot_expert, plan->slot_rank, 4), 1.01);
}

TEST(Eplb, RandomSkewedLoadsAreBetterBalancedThanContiguous) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<int64_t> loads(64);
    std::exponential_distribution<double> dist(0.01);
    for (auto& v : loads) v = int64_t(dist(rng) * dist(rng));
    auto contiguous = ExpertPlacement::contiguous(64, 8, 0);
    auto plan = eplb_placement(loads, 64 + 16, 8, 8, 1);
    ASSERT_TRUE(plan.ok());
    ASSERT_TRUE(ExpertPlacement::from_slots(64, 8, 0, plan->slot_expert, plan->slot_rank).ok());
    EXPECT_LE(imbalance(loads, plan->slot_expert, plan->slot_rank, 8),
              imbalance(loads, contiguous->slot_expert, contiguous->slot_rank, 8));
    EXPECT_LT(imbalance(loads, plan->slot_expert, plan->slot_rank, 8), 1.15) << trial;
  }
}

TEST(Eplb, GroupsStayOnOneNodeInTheHierarchicalPolicy) {
  // 4 groups of 4 experts over 2 nodes of 2 ranks: every group's copies on one node.
  std::vector<int64_t> loads(16);
  for (int e = 0; e < 16; ++e) loads[size_t(e)] = 1 + (e * 37) % 11 + (e < 4 ? 100 : 0);
  auto plan = eplb_placement(loads, 24, 4, 4, 2);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  std::vector<int> group_node(4, -1);
  for (size_t s = 0; s < plan->slot_expert.size(); ++s) {
    const int g = plan->slot_expert[s] / 4, node = plan->slot_rank[s] / 2;
    if (group_node[size_t(g)] < 0) group_node[size_t(g)] = node;
    EXPECT_EQ(group_node[size_t(g)], node) << "group " << g;
  }
  EXPECT_TRUE(ExpertPlacement::from_slots(16, 4, 0, plan->slot_expert, plan->slot_rank).ok());
}

TEST(Eplb, ShapesThatDoNotDivideAreErrors) {
  const std::vector<int64_t> loads(16, 1);
  EXPECT_FALSE(eplb_placement(loads, 18, 4, 1, 1).ok());   // slots over ranks
  EXPECT_FALSE(eplb_placement(loads, 12, 4, 1, 1).ok());   // fewer slots than experts
  EXPECT_FALSE(eplb_placement(loads, 16, 4, 3, 1).ok());   // experts over groups
  EXPECT_FALSE(eplb_placement(loads, 16, 4, 1, 3).ok());   // ranks over nodes
  EXPECT_TRUE(eplb_placement(loads, 16, 4, 2, 4).ok());    // groups do not divide over nodes: global policy
}

}  // namespace
}  // namespace deepinfer
