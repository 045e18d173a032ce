#include "bench/run_report.h"

#include <algorithm>
#include <cstdio>

namespace deepinfer::bench {

using nlohmann::json;

namespace {

// Later minus earlier, per position (positions the earlier scrape lacks count from 0).
std::vector<double> minus(const std::vector<double>& later, const std::vector<double>& earlier) {
  std::vector<double> d(later);
  for (size_t i = 0; i < d.size() && i < earlier.size(); ++i) d[i] -= earlier[i];
  return d;
}

std::optional<SpeculativeFigures> speculative_figures(const ServerMetrics& first, const ServerMetrics& last) {
  if (!first.spec_draft_tokens || !last.spec_draft_tokens || !first.spec_accepted_tokens || !last.spec_accepted_tokens)
    return std::nullopt;
  SpeculativeFigures f;
  f.draft_tokens = *last.spec_draft_tokens - *first.spec_draft_tokens;
  f.accepted_tokens = *last.spec_accepted_tokens - *first.spec_accepted_tokens;
  f.draft_tokens_at = minus(last.spec_draft_tokens_at, first.spec_draft_tokens_at);
  f.accepted_tokens_at = minus(last.spec_accepted_tokens_at, first.spec_accepted_tokens_at);
  if (f.draft_tokens > 0) f.acceptance_rate = f.accepted_tokens / f.draft_tokens;
  std::optional<double> steps;
  if (first.spec_drafts && last.spec_drafts) steps = *last.spec_drafts - *first.spec_drafts;
  else if (!f.draft_tokens_at.empty()) steps = f.draft_tokens_at[0];
  if (steps && *steps > 0) f.accept_length = 1 + f.accepted_tokens / *steps;
  return f;
}

}  // namespace

RunReport make_report(const LoadResult& result, std::string label, json load, int n_gpus) {
  RunReport r;
  r.label = std::move(label);
  r.load = std::move(load);
  r.duration_s = result.duration_s;
  std::vector<double> ttft, tpot, itl, e2e, user_speed;
  for (const RequestRecord& rec : result.records) {
    if (!rec.ok()) {
      ++r.n_failed;
      ++r.errors[rec.error];
      continue;
    }
    ++r.n_completed;
    if (!rec.usage_reported) ++r.n_without_usage;
    r.n_tokens_in += rec.n_tokens_in;
    r.n_tokens_out += rec.n_tokens_out;
    ttft.push_back(rec.ttft_s() * 1e3);
    e2e.push_back(rec.e2e_s * 1e3);
    for (size_t i = 1; i < rec.chunk_times_s.size(); ++i) {
      itl.push_back((rec.chunk_times_s[i] - rec.chunk_times_s[i - 1]) * 1e3);
    }
    const double decode_s = rec.e2e_s - rec.ttft_s();
    if (rec.n_tokens_out >= 2 && decode_s > 0) {
      const double tpot_s = decode_s / static_cast<double>(rec.n_tokens_out - 1);
      tpot.push_back(tpot_s * 1e3);
      user_speed.push_back(1.0 / tpot_s);
    }
  }
  if (r.duration_s > 0) {
    r.requests_per_s = static_cast<double>(r.n_completed) / r.duration_s;
    r.output_tokens_per_s = static_cast<double>(r.n_tokens_out) / r.duration_s;
    r.total_tokens_per_s = static_cast<double>(r.n_tokens_in + r.n_tokens_out) / r.duration_s;
    r.output_tokens_per_s_per_gpu = r.output_tokens_per_s / std::max(1, n_gpus);
  }
  r.ttft_ms = summarize(std::move(ttft));
  r.tpot_ms = summarize(std::move(tpot));
  r.itl_ms = summarize(std::move(itl));
  r.e2e_ms = summarize(std::move(e2e));
  r.user_tokens_per_s = summarize(std::move(user_speed));

  r.metrics_note = result.metrics_error;
  const auto& samples = result.metrics;
  if (samples.size() >= 2) {
    const ServerMetrics& first = samples.front().metrics;
    const ServerMetrics& last = samples.back().metrics;
    if (first.prefix_queries && last.prefix_queries && first.prefix_hits && last.prefix_hits &&
        *last.prefix_queries > *first.prefix_queries) {
      r.prefix_cache_hit_rate = (*last.prefix_hits - *first.prefix_hits) / (*last.prefix_queries - *first.prefix_queries);
    }
    r.speculative = speculative_figures(first, last);
  }
  double kv_sum = 0, rate_sum = 0;
  int kv_n = 0, rate_n = 0;
  for (const MetricsSample& s : samples) {
    if (s.t_s <= 0 || s.t_s > result.duration_s) continue;  // during the load only
    if (s.metrics.kv_usage) {
      kv_sum += *s.metrics.kv_usage;
      ++kv_n;
      r.kv_usage_max = std::max(r.kv_usage_max.value_or(0.0), *s.metrics.kv_usage);
    }
    if (s.metrics.prefix_hit_rate) rate_sum += *s.metrics.prefix_hit_rate, ++rate_n;
  }
  if (kv_n) r.kv_usage_mean = kv_sum / kv_n;
  if (!r.prefix_cache_hit_rate && rate_n) r.prefix_cache_hit_rate = rate_sum / rate_n;
  if (r.metrics_note.empty() && !samples.empty() && !kv_n && !r.prefix_cache_hit_rate) {
    r.metrics_note = "no sample during the load";
  }
  return r;
}

namespace {

json percentiles_json(const Percentiles& p) {
  return {{"n", p.n}, {"mean", p.mean}, {"median", p.median}, {"p90", p.p90}, {"p99", p.p99}};
}

json optional_json(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json speculative_json(const std::optional<SpeculativeFigures>& f) {
  if (!f) return nullptr;
  json positions = json::array();
  for (size_t i = 0; i < f->draft_tokens_at.size(); ++i) {
    const double drafted = f->draft_tokens_at[i];
    const double accepted = i < f->accepted_tokens_at.size() ? f->accepted_tokens_at[i] : 0.0;
    positions.push_back({{"position", i}, {"draft_tokens", drafted}, {"accepted_tokens", accepted},
                         {"acceptance_rate", drafted > 0 ? json(accepted / drafted) : json(nullptr)}});
  }
  return {{"draft_tokens", f->draft_tokens},
          {"accepted_tokens", f->accepted_tokens},
          {"acceptance_rate", optional_json(f->acceptance_rate)},
          {"accept_length", optional_json(f->accept_length)},
          {"per_position", positions}};
}

std::string fmt(const char* format, double a, double b = 0, double c = 0, double d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, format, a, b, c, d);
  return buf;
}

std::string percent_or_dash(const std::optional<double>& v) { return v ? fmt("%.1f %%", *v * 100) : "-"; }

}  // namespace

json to_json(const RunReport& r) {
  return {
      {"label", r.label},
      {"load", r.load},
      {"duration_s", r.duration_s},
      {"requests", {{"completed", r.n_completed}, {"failed", r.n_failed}, {"errors", r.errors},
                    {"without_usage", r.n_without_usage}}},
      {"tokens", {{"input", r.n_tokens_in}, {"output", r.n_tokens_out}}},
      {"throughput",
       {{"requests_per_s", r.requests_per_s},
        {"output_tokens_per_s", r.output_tokens_per_s},
        {"total_tokens_per_s", r.total_tokens_per_s},
        {"output_tokens_per_s_per_gpu", r.output_tokens_per_s_per_gpu}}},
      {"ttft_ms", percentiles_json(r.ttft_ms)},
      {"tpot_ms", percentiles_json(r.tpot_ms)},
      {"itl_ms", percentiles_json(r.itl_ms)},
      {"e2e_ms", percentiles_json(r.e2e_ms)},
      {"user_output_tokens_per_s",
       {{"n", r.user_tokens_per_s.n},
        {"mean", r.user_tokens_per_s.mean},
        {"p10", r.user_tokens_per_s.p10},
        {"p50", r.user_tokens_per_s.median},
        {"p90", r.user_tokens_per_s.p90}}},
      {"server",
       {{"prefix_cache_hit_rate", optional_json(r.prefix_cache_hit_rate)},
        {"kv_cache_usage_mean", optional_json(r.kv_usage_mean)},
        {"kv_cache_usage_max", optional_json(r.kv_usage_max)},
        {"speculative", speculative_json(r.speculative)},
        {"note", r.metrics_note}}},
  };
}

std::string format_report(const RunReport& r) {
  std::string s = "==================== " + r.label + " ====================\n";
  s += fmt("Requests completed / failed        %.0f / %.0f\n", r.n_completed, r.n_failed);
  for (const auto& [kind, n] : r.errors) s += "  error " + kind + fmt(": %.0f\n", n);
  if (r.n_without_usage) s += fmt("  (%.0f without usage: output tokens counted as chunks)\n", r.n_without_usage);
  s += fmt("Duration (s)                       %.2f\n", r.duration_s);
  s += fmt("Input / output tokens              %.0f / %.0f\n", r.n_tokens_in, r.n_tokens_out);
  s += fmt("Request throughput (req/s)         %.2f\n", r.requests_per_s);
  s += fmt("Output throughput (tok/s)          %.1f  (%.1f per GPU)\n", r.output_tokens_per_s,
           r.output_tokens_per_s_per_gpu);
  s += fmt("Total throughput (tok/s)           %.1f\n", r.total_tokens_per_s);
  s += "Latency (ms)          mean     median        p90        p99\n";
  auto row = [&](const char* name, const Percentiles& p) {
    s += std::string(name) + fmt("%10.2f %10.2f %10.2f %10.2f\n", p.mean, p.median, p.p90, p.p99);
  };
  row("  TTFT          ", r.ttft_ms);
  row("  TPOT          ", r.tpot_ms);
  row("  ITL           ", r.itl_ms);
  row("  E2E           ", r.e2e_ms);
  s += fmt("Per-user tok/s  p10 / p50 / p90    %.1f / %.1f / %.1f\n", r.user_tokens_per_s.p10,
           r.user_tokens_per_s.median, r.user_tokens_per_s.p90);
  s += "Prefix-cache hit rate              " + percent_or_dash(r.prefix_cache_hit_rate) + "\n";
  s += "KV-cache usage mean / max          " + percent_or_dash(r.kv_usage_mean) + " / " +
       percent_or_dash(r.kv_usage_max) + "\n";
  if (r.speculative) {
    const SpeculativeFigures& f = *r.speculative;
    s += fmt("Speculative drafts / accepted      %.0f / %.0f", f.draft_tokens, f.accepted_tokens);
    if (f.acceptance_rate) s += "  (" + percent_or_dash(f.acceptance_rate) + ")";
    s += "\n";
    if (f.accept_length) s += fmt("Accept length (tokens/draft step)  %.2f\n", *f.accept_length);
    if (!f.draft_tokens_at.empty()) {
      s += "  accepted per draft position      ";
      for (size_t i = 0; i < f.draft_tokens_at.size(); ++i) {
        const double accepted = i < f.accepted_tokens_at.size() ? f.accepted_tokens_at[i] : 0.0;
        s += (i ? " " : "") + (f.draft_tokens_at[i] > 0 ? fmt("%.1f%%", 100 * accepted / f.draft_tokens_at[i]) : "-");
      }
      s += "\n";
    }
  }
  if (!r.metrics_note.empty()) s += "  (server metrics: " + r.metrics_note + ")\n";
  return s;
}

std::string format_sweep(const std::vector<RunReport>& reports) {
  std::string s =
      "run              req/s   out tok/s  tok/s/user p50   TTFT p50    p90   ITL p50    p90  hit %  failed\n";
  for (const RunReport& r : reports) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%-14s %7.2f %11.1f %15.1f %10.1f %6.1f %9.2f %6.2f %6s %7ld\n", r.label.c_str(),
                  r.requests_per_s, r.output_tokens_per_s, r.user_tokens_per_s.median, r.ttft_ms.median,
                  r.ttft_ms.p90, r.itl_ms.median, r.itl_ms.p90,
                  r.prefix_cache_hit_rate ? fmt("%.1f", *r.prefix_cache_hit_rate * 100).c_str() : "-", r.n_failed);
    s += buf;
  }
  return s;
}

}  // namespace deepinfer::bench
