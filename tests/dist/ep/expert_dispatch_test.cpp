// The bookkeeping of an expert-parallel MoE layer (model/expert_dispatch.h): placement slices,
// per-rank counts and send order, the wire records (and their validation on receipt), and the
// combine order, without any communication.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "model/expert_dispatch.h"

namespace deepinfer {
namespace {

TEST(ExpertPlacement, ContiguousSlicesCoverEveryExpertOnce) {
  auto p = ExpertPlacement::contiguous(10, 4, 1);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->slot_rank, (std::vector<int32_t>{0, 0, 0, 1, 1, 2, 2, 2, 3, 3}));
  EXPECT_EQ(p->slot_expert, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(p->held_experts(), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(p->local_slots(), (std::vector<int32_t>{3, 4}));
  EXPECT_TRUE(p->holds(4));
  EXPECT_FALSE(p->holds(5));
  for (int n = 1; n <= 16; ++n) {  // every rank holds at least one expert, in order
    auto q = ExpertPlacement::contiguous(16, n, 0);
    ASSERT_TRUE(q.ok());
    for (int r = 0; r < n; ++r) EXPECT_NE(std::count(q->slot_rank.begin(), q->slot_rank.end(), r), 0) << n;
    EXPECT_TRUE(std::is_sorted(q->slot_rank.begin(), q->slot_rank.end()));
  }
}

TEST(ExpertPlacement, CopiesTakeTurnsOffsetByRank) {
  // Expert 1 in slots 1 and 3 (ranks 0 and 1).
  auto p = ExpertPlacement::from_slots(3, 2, 1, {0, 1, 2, 1}, {0, 0, 1, 1});
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->replicas[1], (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(p->slot_for(1, 0), 3);  // (k + rank) % copies
  EXPECT_EQ(p->slot_for(1, 1), 1);
  EXPECT_EQ(p->slot_for(0, 7), 0);
  EXPECT_EQ(p->held_experts(), (std::vector<int32_t>{1, 2}));
  EXPECT_FALSE(ExpertPlacement::from_slots(3, 2, 0, {0, 1, 1}, {0, 0, 1}).ok());  // expert 2 nowhere
  EXPECT_FALSE(ExpertPlacement::from_slots(3, 2, 0, {0, 1, 2}, {0, 0, 2}).ok());  // rank 2 of 2
  EXPECT_FALSE(ExpertPlacement::from_slots(3, 2, 0, {0, 1, 3}, {0, 0, 1}).ok());  // expert 3 of 3
}

TEST(ExpertPlacement, MoreRanksThanExpertsIsAnError) {
  auto p = ExpertPlacement::contiguous(4, 5, 0);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("5 ranks"), std::string::npos) << p.status().message();
  EXPECT_FALSE(ExpertPlacement::contiguous(4, 0, 0).ok());
  EXPECT_FALSE(ExpertPlacement::contiguous(4, 2, 2).ok());
}

TEST(DispatchPlan, CountsOrderAndSlots) {
  auto p = ExpertPlacement::contiguous(8, 4, 0);  // experts {0,1} {2,3} {4,5} {6,7}
  ASSERT_TRUE(p.ok());
  // 3 rows, top_k 2: assignments a = r * 2 + j.
  const std::vector<int32_t> ids = {7, 0, 2, 3, 1, 6};
  const DispatchPlan plan = DispatchPlan::make(ids, *p);
  EXPECT_EQ(plan.n_send, (std::vector<int64_t>{2, 2, 0, 2}));
  // By rank, then assignment ascending.
  EXPECT_EQ(plan.send_order, (std::vector<int32_t>{1, 4, 2, 3, 0, 5}));
  for (size_t i = 0; i < plan.send_order.size(); ++i) EXPECT_EQ(plan.position[size_t(plan.send_order[i])], int64_t(i));
  EXPECT_EQ(plan.slot, ids);  // one slot per expert, slot e holding expert e
}

TEST(DispatchPlan, AnExpertsAssignmentsTakeTurnsOverItsCopies) {
  // Expert 0 in slots 0 (rank 0) and 2 (rank 1); expert 1 in slot 1 (rank 0).
  auto p = ExpertPlacement::from_slots(2, 2, 0, {0, 1, 0}, {0, 0, 1});
  ASSERT_TRUE(p.ok());
  const std::vector<int32_t> ids = {0, 1, 0, 1, 0, 1, 0, 1};  // top_k 2
  const DispatchPlan plan = DispatchPlan::make(ids, *p);
  EXPECT_EQ(plan.slot, (std::vector<int32_t>{0, 1, 2, 1, 0, 1, 2, 1}));
  EXPECT_EQ(plan.n_send, (std::vector<int64_t>{6, 2}));
}

TEST(DispatchPlan, NoRowsSendsNothing) {
  auto p = ExpertPlacement::contiguous(8, 2, 1);
  const DispatchPlan plan = DispatchPlan::make({}, *p);
  EXPECT_EQ(plan.n_send, (std::vector<int64_t>{0, 0}));
  EXPECT_TRUE(plan.send_order.empty());
}

TEST(DispatchRecords, PackThenParseGivesEachAssignmentsRowAndLocalExpert) {
  auto home = ExpertPlacement::contiguous(4, 2, 0);
  auto owner = ExpertPlacement::contiguous(4, 2, 1);  // holds experts 2 and 3
  const int64_t hidden = 3, ldx = 5;
  const std::vector<float> x = {1, 2, 3, -1, -1, 4, 5, 6, -1, -1};  // 2 rows
  const std::vector<int32_t> ids = {3, 0, 2, 1};
  const DispatchPlan plan = DispatchPlan::make(ids, *home);
  std::vector<uint8_t> bytes(ids.size() * size_t(dispatch_record_bytes(hidden)));
  pack_dispatch(plan, x.data(), ldx, hidden, ids, 2, bytes);
  // Rank 1's block: assignments 0 (row 0, expert 3) and 2 (row 1, expert 2).
  const size_t off = size_t(plan.n_send[0] * dispatch_record_bytes(hidden));
  const std::vector<int32_t> local_index = {-1, -1, 0, 1};  // by slot
  auto got = parse_dispatch(std::span<const uint8_t>(bytes).subspan(off), hidden, local_index);
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_EQ(got->n, 2);
  EXPECT_EQ(got->local_ids, (std::vector<int32_t>{1, 0}));
  EXPECT_EQ(std::vector<float>(got->x, got->x + 3), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(std::vector<float>(got->x + got->ldx, got->x + got->ldx + 3), (std::vector<float>{4, 5, 6}));
  (void)owner;
}

TEST(DispatchRecords, MalformedRecordsAreErrorsNotCrashes) {
  const int64_t hidden = 2, rec = dispatch_record_bytes(hidden);
  const std::vector<int32_t> local_index = {-1, 0};
  std::vector<uint8_t> bytes(size_t(rec), 0);
  auto put = [&](int32_t id, int32_t pad) {
    std::memcpy(bytes.data(), &id, 4);
    std::memcpy(bytes.data() + 4, &pad, 4);
  };
  put(1, 0);
  EXPECT_TRUE(parse_dispatch(bytes, hidden, local_index).ok());
  put(0, 0);  // an expert held elsewhere
  EXPECT_FALSE(parse_dispatch(bytes, hidden, local_index).ok());
  put(7, 0);  // out of range
  EXPECT_FALSE(parse_dispatch(bytes, hidden, local_index).ok());
  put(-3, 0);
  EXPECT_FALSE(parse_dispatch(bytes, hidden, local_index).ok());
  put(1, 9);  // the reserved word set
  EXPECT_FALSE(parse_dispatch(bytes, hidden, local_index).ok());
  put(1, 0);
  auto partial = parse_dispatch(std::span<const uint8_t>(bytes).first(size_t(rec - 1)), hidden, local_index);
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.status().message().find("whole records"), std::string::npos);
  EXPECT_EQ(parse_dispatch({}, hidden, local_index)->n, 0);
}

TEST(DispatchRecords, AnnouncedCountsAreBounded) {
  const std::vector<int64_t> fine = {0, 3, 1000};
  EXPECT_TRUE(check_announced_counts(fine, 40).ok());
  const std::vector<int64_t> negative = {1, -1};
  auto s = check_announced_counts(negative, 40);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("rank 1 announced -1 records"), std::string::npos);
  const std::vector<int64_t> huge = {int64_t(1) << 30, int64_t(1) << 30};  // 2^31 records of 1 KiB: over 2^40 bytes
  EXPECT_FALSE(check_announced_counts(huge, 1024).ok());
  const std::vector<int64_t> overflow = {INT64_MAX, INT64_MAX};
  EXPECT_FALSE(check_announced_counts(overflow, 8).ok());
}

TEST(CombineExpertOutputs, SumsInIncreasingExpertIdThenShared) {
  auto p = ExpertPlacement::contiguous(4, 2, 0);
  // One row, top_k 3, experts chosen in the order 3, 0, 2 (by score).
  const std::vector<int32_t> ids = {3, 0, 2};
  const std::vector<float> weights = {1.0f, 1.0f, 1.0f};
  const DispatchPlan plan = DispatchPlan::make(ids, *p);
  // Outputs in send order, hidden 1: values chosen so that the order of the f32 sum shows.
  std::vector<float> outputs(3);
  const float value_of[4] = {1e8f, 0, -1e8f, 1.0f};  // by expert
  for (size_t i = 0; i < 3; ++i) outputs[i] = value_of[ids[size_t(plan.send_order[i])]];
  const float shared = 0.5f;
  float y = -7;
  combine_expert_outputs(plan, ids, weights, 3, outputs.data(), &shared, 1, &y, 1);
  // ((0 + 1e8) + -1e8) + 1 + 0.5 in expert order 0, 2, 3; other orders lose the 1 to rounding.
  EXPECT_EQ(y, 1.5f);
}

}  // namespace
}  // namespace deepinfer
