// The retry rule of the P/D contract: only a 503 carrying X-DeepInfer-Retry: prefill, for a
// request that named a prefill worker, is retried (while another prefill worker is left).
#include "dist/router/retry_rule.h"

#include <gtest/gtest.h>

namespace deepinfer::router {
namespace {

TEST(RetryRule, PrefillFailureIsRetriedWhileAnotherIsLeft) {
  EXPECT_EQ(upstream_action(503, "prefill", true, true), UpstreamAction::kRetryPrefill);
  EXPECT_EQ(upstream_action(503, "Prefill ", true, true), UpstreamAction::kRetryPrefill);
  EXPECT_EQ(upstream_action(503, "prefill", true, false), UpstreamAction::kPrefillFailed);
}

TEST(RetryRule, EverythingElseIsRelayed) {
  EXPECT_EQ(upstream_action(200, "", true, true), UpstreamAction::kRelay);
  EXPECT_EQ(upstream_action(200, "prefill", true, true), UpstreamAction::kRelay);
  EXPECT_EQ(upstream_action(503, "", true, true), UpstreamAction::kRelay);         // the worker's own 503
  EXPECT_EQ(upstream_action(503, "decode", true, true), UpstreamAction::kRelay);
  EXPECT_EQ(upstream_action(500, "prefill", true, true), UpstreamAction::kRelay);
  EXPECT_EQ(upstream_action(400, "prefill", true, true), UpstreamAction::kRelay);
  EXPECT_EQ(upstream_action(503, "prefill", false, true), UpstreamAction::kRelay);  // no prefill worker was named
}

}  // namespace
}  // namespace deepinfer::router
