#include "engine/sequence.h"

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

Sequence make() { return Sequence(1, 7, 0, 0, 3, {5, 6, 7}, 1, 1); }

TEST(Sequence, WalksItsStateMachine) {
  Sequence s = make();
  EXPECT_EQ(s.state(), SequenceState::kWaiting);
  EXPECT_EQ(s.n_slots(), 2);
  s.set_state(SequenceState::kRunning);
  s.set_n_computed(3);
  s.append_token(9);
  EXPECT_EQ(s.n_output(), 1);
  EXPECT_EQ(s.n_uncomputed(), 1);
  s.set_state(SequenceState::kPreempted);
  s.set_state(SequenceState::kRunning);
  Sequence child = s.fork(2, 1);
  EXPECT_EQ(child.state(), SequenceState::kRunning);
  EXPECT_EQ(child.n_prompt(), 3);
  EXPECT_EQ(child.n_computed(), 3);
  EXPECT_EQ(child.n_slots(), 1);
  s.set_finished(FinishReason::kLength);
  EXPECT_EQ(s.finish_reason(), FinishReason::kLength);
  EXPECT_EQ(finish_reason_name(s.finish_reason()), "length");
}

TEST(SequenceDeathTest, RejectsIllegalTransitions) {
  EXPECT_DEATH(
      {
        Sequence s = make();
        s.set_state(SequenceState::kPreempted);
      },
      "state 0 -> 2");
  EXPECT_DEATH(
      {
        Sequence s = make();
        s.set_finished(FinishReason::kAbort);
        s.set_state(SequenceState::kRunning);
      },
      "state 3 -> 1");
}

TEST(Scheduling, OrderIsPriorityThenArrivalThenSample) {
  Sequence a(1, 1, 0, 0, 5, {1}, 1, 0), b(2, 2, 0, 0, 6, {1}, 1, 0), c(3, 3, 0, -1, 9, {1}, 1, 0),
      d(4, 1, 1, 0, 5, {1}, 1, 0);
  EXPECT_TRUE(a.goes_before(b));
  EXPECT_TRUE(c.goes_before(a));
  EXPECT_TRUE(a.goes_before(d));
  EXPECT_FALSE(d.goes_before(a));
}

}  // namespace
}  // namespace deepinfer
