// The decode choice: fewest sequences (polled, corrected by the router's own requests since the
// poll), then lower KV usage, then round-robin among equals.
#include "dist/router/least_load.h"

#include <gtest/gtest.h>

namespace deepinfer::router {
namespace {

DecodeCandidate candidate(double running, double waiting, double kv, int64_t in_flight = 0, int64_t at_poll = 0) {
  return DecodeCandidate{WorkerLoad{running, waiting, kv}, in_flight, at_poll};
}

TEST(LeastLoad, NoCandidate) { EXPECT_FALSE(least_loaded({}).has_value()); }

TEST(LeastLoad, FewestSequencesWins) {
  EXPECT_EQ(*least_loaded({candidate(3, 0, 0.1), candidate(1, 1, 0.9), candidate(2, 2, 0.0)}), 1u);
  EXPECT_EQ(*least_loaded({candidate(0, 5, 0.0), candidate(4, 0, 0.5)}), 1u);  // waiting counts as much as running
}

TEST(LeastLoad, KvUsageBreaksTies) {
  EXPECT_EQ(*least_loaded({candidate(2, 0, 0.7), candidate(2, 0, 0.2), candidate(2, 0, 0.5)}), 1u);
}

TEST(LeastLoad, EqualWorkersTakeTurns) {
  const std::vector<DecodeCandidate> idle = {candidate(0, 0, 0), candidate(0, 0, 0), candidate(0, 0, 0)};
  EXPECT_EQ(*least_loaded(idle, 0), 0u);
  EXPECT_EQ(*least_loaded(idle, 1), 1u);
  EXPECT_EQ(*least_loaded(idle, 5), 2u);
}

TEST(LeastLoad, RequestsSinceThePollCount) {
  // Both polled idle; the router has since sent 3 requests to the first: a burst spreads.
  EXPECT_EQ(*least_loaded({candidate(0, 0, 0, 3, 0), candidate(0, 0, 0, 0, 0)}), 1u);
  // The poll already saw the first one's 2 requests (2 in flight then, 2 now): not counted twice.
  EXPECT_DOUBLE_EQ(estimated_sequences(candidate(2, 0, 0, 2, 2)), 2.0);
  // Requests finished since the poll lower the estimate, but never below what is in flight.
  EXPECT_DOUBLE_EQ(estimated_sequences(candidate(4, 0, 0, 1, 4)), 1.0);
  EXPECT_DOUBLE_EQ(estimated_sequences(candidate(0, 0, 0, 2, 5)), 2.0);
}

}  // namespace
}  // namespace deepinfer::router
