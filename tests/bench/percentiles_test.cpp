#include "bench/percentiles.h"

#include <gtest/gtest.h>

namespace deepinfer::bench {
namespace {

// Expected values are numpy.percentile's (linear interpolation).
TEST(PercentilesTest, MatchesLinearInterpolation) {
  const Percentiles p = summarize({10, 1, 9, 2, 8, 3, 7, 4, 6, 5});
  EXPECT_EQ(p.n, 10);
  EXPECT_DOUBLE_EQ(p.mean, 5.5);
  EXPECT_DOUBLE_EQ(p.median, 5.5);
  EXPECT_NEAR(p.p10, 1.9, 1e-12);
  EXPECT_NEAR(p.p90, 9.1, 1e-12);
  EXPECT_NEAR(p.p99, 9.91, 1e-12);
}

TEST(PercentilesTest, EdgeCases) {
  EXPECT_EQ(summarize({}).n, 0);
  EXPECT_DOUBLE_EQ(summarize({}).p99, 0);
  const Percentiles one = summarize({4});
  EXPECT_DOUBLE_EQ(one.median, 4);
  EXPECT_DOUBLE_EQ(one.p99, 4);
  EXPECT_DOUBLE_EQ(percentile({1, 2}, 0), 1);
  EXPECT_DOUBLE_EQ(percentile({1, 2}, 100), 2);
}

}  // namespace
}  // namespace deepinfer::bench
