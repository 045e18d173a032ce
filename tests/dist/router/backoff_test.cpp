// BackoffSchedule: the interval while healthy; after failures, a doubling wait up to the cap.
#include "dist/router/backoff.h"

#include <gtest/gtest.h>

namespace deepinfer::router {
namespace {

TEST(Backoff, DoublesUpToTheCap) {
  BackoffSchedule b;
  b.interval_s = 0.5;
  b.initial_s = 0.25;
  b.factor = 2;
  b.max_s = 3;
  EXPECT_DOUBLE_EQ(b.delay_s(0), 0.5);
  EXPECT_DOUBLE_EQ(b.delay_s(1), 0.25);
  EXPECT_DOUBLE_EQ(b.delay_s(2), 0.5);
  EXPECT_DOUBLE_EQ(b.delay_s(3), 1.0);
  EXPECT_DOUBLE_EQ(b.delay_s(4), 2.0);
  EXPECT_DOUBLE_EQ(b.delay_s(5), 3.0);
  EXPECT_DOUBLE_EQ(b.delay_s(1000000), 3.0);  // no overflow, however long it has been down
}

}  // namespace
}  // namespace deepinfer::router
