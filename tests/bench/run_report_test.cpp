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

// Speculative figures are the server's counters over the run: last scrape minus first. Accept
// length counts drafting steps by the drafts at position 0 (DeepInfer) or by num_drafts (vLLM).
TEST(RunReportTest, SpeculativeFiguresOverTheRun) {
  LoadResult result;
  result.duration_s = 10;
  result.records = {request(0.1, 0.01, 2, 10)};
  auto sample = [](double t, double drafted, double accepted, std::vector<double> drafted_at,
                   std::vector<double> accepted_at) {
    ServerMetrics m;
    m.spec_draft_tokens = drafted;
    m.spec_accepted_tokens = accepted;
    m.spec_draft_tokens_at = std::move(drafted_at);
    m.spec_accepted_tokens_at = std::move(accepted_at);
    return MetricsSample{t, m};
  };
  // Before: 10 steps of 2 drafts, 12 accepted. During: 40 steps, 30 of them with a 2nd and 3rd
  // draft (100 drafts), 40 + 20 + 10 = 70 accepted.
  result.metrics = {sample(0, 20, 12, {10, 10}, {8, 4}), sample(5, 50, 30, {30, 15, 5}, {20, 8, 2}),
                    sample(11, 120, 82, {50, 40, 30}, {48, 24, 10})};
  const RunReport r = make_report(result, "x", {}, 1);
  ASSERT_TRUE(r.speculative);
  EXPECT_DOUBLE_EQ(r.speculative->draft_tokens, 100);
  EXPECT_DOUBLE_EQ(r.speculative->accepted_tokens, 70);
  EXPECT_DOUBLE_EQ(*r.speculative->acceptance_rate, 0.7);
  EXPECT_DOUBLE_EQ(*r.speculative->accept_length, 1 + 70.0 / 40);
  const nlohmann::json j = to_json(r)["server"]["speculative"];
  EXPECT_EQ(j["draft_tokens"], 100);
  EXPECT_EQ(j["per_position"].size(), 3u);
  EXPECT_EQ(j["per_position"][1]["draft_tokens"], 30);
  EXPECT_DOUBLE_EQ(j["per_position"][1]["acceptance_rate"].get<double>(), 20.0 / 30);
  EXPECT_EQ(j["per_position"][2]["draft_tokens"], 30);  // absent before: counted from 0
  const std::string text = format_report(r);
  EXPECT_NE(text.find("Speculative drafts / accepted      100 / 70  (70.0 %)"), std::string::npos) << text;
  EXPECT_NE(text.find("Accept length (tokens/draft step)  2.75"), std::string::npos) << text;
  EXPECT_NE(text.find("100.0% 66.7% 33.3%"), std::string::npos) << text;

  // vLLM: drafting steps from num_drafts; no per-position drafts.
  for (auto& s : result.metrics) s.metrics.spec_draft_tokens_at.clear();
  result.metrics.front().metrics.spec_drafts = 5;
  result.metrics.back().metrics.spec_drafts = 40;
  EXPECT_DOUBLE_EQ(*make_report(result, "x", {}, 1).speculative->accept_length, 3.0);

  // No drafts during the run: counts 0, rates null; no counters at all: no figures.
  result.metrics = {sample(0, 20, 12, {}, {}), sample(11, 20, 12, {}, {})};
  const RunReport idle = make_report(result, "x", {}, 1);
  EXPECT_DOUBLE_EQ(idle.speculative->draft_tokens, 0);
  EXPECT_FALSE(idle.speculative->acceptance_rate);
  EXPECT_TRUE(to_json(idle)["server"]["speculative"]["accept_length"].is_null());
  for (auto& s : result.metrics) s.metrics = ServerMetrics{};
  const RunReport plain = make_report(result, "x", {}, 1);
  EXPECT_FALSE(plain.speculative);
  EXPECT_TRUE(to_json(plain)["server"]["speculative"].is_null());
  EXPECT_EQ(format_report(plain).find("Speculative"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::bench
