// Metrics render in the Prometheus text exposition format (prometheus.io/docs/instrumenting/
// exposition_formats): cumulative histogram buckets ending in +Inf, _sum and _count.
#include "server/metrics.h"

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

TEST(Histogram, CumulativeBuckets) {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(0.5);
  h.observe(7.0);
  std::string out;
  h.render("x", out);
  EXPECT_NE(out.find("x_bucket{le=\"0.1\"} 1\n"), std::string::npos);
  EXPECT_NE(out.find("x_bucket{le=\"1\"} 3\n"), std::string::npos);
  EXPECT_NE(out.find("x_bucket{le=\"+Inf\"} 4\n"), std::string::npos);
  EXPECT_NE(out.find("x_sum 8.05\n"), std::string::npos);
  EXPECT_NE(out.find("x_count 4\n"), std::string::npos);
}

TEST(ServerMetrics, RendersCountersAndGauges) {
  ServerMetrics m;
  m.count_request("/v1/completions", 200);
  m.count_request("/v1/completions", 200);
  m.count_request("/v1/completions", 400);
  m.prompt_tokens += 12;
  ServerMetrics::EngineGauges g;
  g.n_running = 3;
  g.kv_usage = 0.25;
  g.prefix_cache_queries = 10;
  g.prefix_cache_hits = 4;
  g.spec_draft_tokens = 9;
  g.spec_accepted_tokens = 5;
  g.spec_drafts_at = {6, 3, 0, 0};
  g.spec_accepted_at = {4, 1, 0, 0};
  const std::string out = m.render(g);
  EXPECT_NE(out.find("deepinfer_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 2\n"), std::string::npos);
  EXPECT_NE(out.find("deepinfer_requests_total{endpoint=\"/v1/completions\",status=\"400\"} 1\n"), std::string::npos);
  EXPECT_NE(out.find("deepinfer_prompt_tokens_total 12\n"), std::string::npos);
  EXPECT_NE(out.find("deepinfer_num_requests_running 3\n"), std::string::npos);
  EXPECT_NE(out.find("deepinfer_kv_cache_usage_ratio 0.25\n"), std::string::npos);
  EXPECT_NE(out.find("deepinfer_prefix_cache_hit_rate 0.4\n"), std::string::npos);
  EXPECT_NE(out.find("deepinfer_spec_decode_draft_tokens_total 9\n"), std::string::npos);
  EXPECT_NE(out.find("deepinfer_spec_decode_accepted_tokens_total 5\n"), std::string::npos);
  EXPECT_NE(out.find("deepinfer_spec_decode_draft_tokens_per_pos_total{position=\"1\"} 3\n"), std::string::npos);
  EXPECT_NE(out.find("deepinfer_spec_decode_accepted_tokens_per_pos_total{position=\"0\"} 4\n"), std::string::npos);
  EXPECT_NE(out.find("deepinfer_spec_decode_accepted_tokens_per_pos_total{position=\"1\"} 1\n"), std::string::npos);
  EXPECT_EQ(out.find("position=\"2\""), std::string::npos);  // never drafted there
  EXPECT_NE(out.find("# TYPE deepinfer_time_to_first_token_seconds histogram\n"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer
