#include "bench/distribution.h"

#include <gtest/gtest.h>

namespace deepinfer::bench {
namespace {

TEST(DistributionTest, ParsesEveryForm) {
  Rng rng(1);
  EXPECT_EQ(Distribution::Parse("7")->sample_count(rng), 7);
  EXPECT_EQ(Distribution::Parse("fixed:9")->sample_count(rng), 9);
  EXPECT_DOUBLE_EQ(Distribution::Parse("0.25")->sample_seconds(rng), 0.25);
  EXPECT_TRUE(Distribution::Parse("uniform:1:3").ok());
  EXPECT_TRUE(Distribution::Parse("normal:100:10").ok());
  EXPECT_TRUE(Distribution::Parse("exponential:2").ok());
  EXPECT_EQ(Distribution::Parse("uniform:1:3")->spec(), "uniform:1:3");
}

TEST(DistributionTest, RejectsMalformedSpecs) {
  for (const char* spec : {"", "x", "-1", "uniform:3:1", "uniform:1", "normal:1", "exponential", "fixed:1:2",
                           "gamma:1:2", "uniform:1:2:3", "1e999"}) {
    auto d = Distribution::Parse(spec);
    EXPECT_FALSE(d.ok()) << spec;
    if (!d.ok()) {
      EXPECT_NE(d.status().message().find("distribution"), std::string::npos);
    }
  }
}

TEST(DistributionTest, UniformCountsCoverBothEndsAndNothingElse) {
  auto d = Distribution::Parse("uniform:2:4");
  Rng rng(3);
  int seen[6] = {0};
  for (int i = 0; i < 3000; ++i) {
    const int64_t v = d->sample_count(rng);
    ASSERT_GE(v, 2);
    ASSERT_LE(v, 4);
    ++seen[v];
  }
  EXPECT_GT(seen[2], 900);
  EXPECT_GT(seen[4], 900);
}

TEST(DistributionTest, ExponentialHasItsMean) {
  auto d = Distribution::Parse("exponential:2");
  Rng rng(5);
  double sum = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) sum += d->sample_seconds(rng);
  EXPECT_NEAR(sum / n, 2.0, 0.03);
}

TEST(DistributionTest, NormalIsClampedAtTheMinimum) {
  auto d = Distribution::Parse("normal:1:50");
  Rng rng(7);
  for (int i = 0; i < 1000; ++i) EXPECT_GE(d->sample_count(rng, 1), 1);
}

TEST(RngTest, DerivedStreamsAreDeterministicAndDistinct) {
  EXPECT_EQ(Rng::Derive(1, 2, 3).next(), Rng::Derive(1, 2, 3).next());
  EXPECT_NE(Rng::Derive(1, 2, 3).next(), Rng::Derive(1, 2, 4).next());
  EXPECT_NE(Rng::Derive(1, 2, 3).next(), Rng::Derive(1, 3, 3).next());
  EXPECT_NE(Rng::Derive(1, 2, 3).next(), Rng::Derive(2, 2, 3).next());
  // mt19937_64 is specified by the standard: the same seed gives the same numbers everywhere.
  EXPECT_EQ(Rng(5489).next(), 14514284786278117030ULL);
}

}  // namespace
}  // namespace deepinfer::bench
