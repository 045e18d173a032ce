#include "bench/run_report.h"

#include <gtest/gtest.h>

namespace deepinfer::bench {
namespace {

// A request with TTFT ttft_s, then n_out - 1 tokens every itl_s.
RequestRecord request(double ttft_s, double itl_s, int64_t n_out, int64_t n_in) {
  RequestRecord r;
  for (int64_t k = 0; k < n_out; ++k) r.chunk_times_s.push_back(ttft_s + itl_s * static_cast<double>(k));
  r.e2e_s = r.chunk_times_s.back();
  r.n_tokens_in = n_in;
  r.n_tokens_out = n_out;
  r.usage_reported = true;
  return r;
}

TEST(RunReportTest, KnownTimingsGiveKnownNumbers) {
  LoadResult result;
  result.duration_s = 2.0;
  result.records = {request(0.100, 0.010, 11, 50), request(0.300, 0.020, 11, 150)};
  RequestRecord failed;
  failed.error = "http_500";
  result.records.push_back(failed);
  result.records.push_back(failed);
  const RunReport r = make_report(result, "c=2", {{"mode", "concurrency"}}, 2);
  EXPECT_EQ(r.n_completed, 2);
  EXPECT_EQ(r.n_failed, 2);
  EXPECT_EQ(r.errors.at("http_500"), 2);
  EXPECT_EQ(r.n_tokens_out, 22);
  EXPECT_DOUBLE_EQ(r.requests_per_s, 1.0);
  EXPECT_DOUBLE_EQ(r.output_tokens_per_s, 11.0);
  EXPECT_DOUBLE_EQ(r.total_tokens_per_s, 111.0);
  EXPECT_DOUBLE_EQ(r.output_tokens_per_s_per_gpu, 5.5);
  EXPECT_NEAR(r.ttft_ms.mean, 200, 1e-9);
  EXPECT_NEAR(r.ttft_ms.p90, 280, 1e-9);
  EXPECT_NEAR(r.tpot_ms.median, 15, 1e-9);
  EXPECT_EQ(r.itl_ms.n, 20);
  EXPECT_NEAR(r.itl_ms.mean, 15, 1e-9);
  EXPECT_NEAR(r.itl_ms.p90, 20, 1e-9);
  EXPECT_NEAR(r.e2e_ms.p99, 200 + 0.99 * 300, 1e-9);  // e2e: 200 and 500 ms
  EXPECT_NEAR(r.user_tokens_per_s.p10, 50 + 0.1 * 50, 1e-9);  // 1000 / TPOT: 100 and 50
  EXPECT_NEAR(r.user_tokens_per_s.p90, 50 + 0.9 * 50, 1e-9);
}

TEST(RunReportTest, ServerMetricsOverTheRun) {
  LoadResult result;
  result.duration_s = 10;
  result.records = {request(0.1, 0.01, 2, 10)};
  auto sample = [](double t, double kv, double queries, double hits) {
    ServerMetrics m;
    m.kv_usage = kv;
    m.prefix_queries = queries;
    m.prefix_hits = hits;
    return MetricsSample{t, m};
  };
  result.metrics = {sample(0, 0.9, 1000, 100), sample(2, 0.2, 1500, 300), sample(4, 0.4, 2000, 500), sample(11, 0.0, 3000, 1100)};
  const RunReport r = make_report(result, "x", {}, 1);
  EXPECT_DOUBLE_EQ(*r.prefix_cache_hit_rate, 0.5);  // (1100-100)/(3000-1000)
  EXPECT_DOUBLE_EQ(*r.kv_usage_mean, 0.3);           // samples during the load only
  EXPECT_DOUBLE_EQ(*r.kv_usage_max, 0.4);
  EXPECT_EQ(to_json(r)["server"]["prefix_cache_hit_rate"], 0.5);

  result.metrics.clear();
  result.metrics_error = "GET /metrics: http_404";
  const RunReport none = make_report(result, "x", {}, 1);
  EXPECT_FALSE(none.prefix_cache_hit_rate);
  EXPECT_TRUE(to_json(none)["server"]["kv_cache_usage_max"].is_null());
  EXPECT_NE(format_report(none).find("http_404"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::bench
