#include "server/metrics.h"

#include <cmath>
#include <cstdio>

namespace deepinfer {
namespace {

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void header(std::string& out, const std::string& name, const char* type, const char* help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 10, 30, 60};
}

}  // namespace

void append_metric(std::string& out, const std::string& name, const char* type, const char* help,
                   const std::string& labels, double value) {
  header(out, name, type, help);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", value);
  out += name + (labels.empty() ? std::string() : "{" + labels + "}") + " " + buf + "\n";
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  std::lock_guard<std::mutex> lock(mu_);
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(const std::string& name, std::string& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const double le = i < bounds_.size() ? bounds_[i] : INFINITY;
    out += name + "_bucket{le=\"" + number(le) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_sum " + number(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

ServerMetrics::ServerMetrics()
    : time_to_first_token(latency_buckets()), inter_token_latency(latency_buckets()), e2e_latency(latency_buckets()) {}

void ServerMetrics::count_request(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{endpoint, status}];
}

std::string ServerMetrics::render(const EngineGauges& g) const {
  std::string out;
  header(out, "deepinfer_requests_total", "counter", "HTTP requests by endpoint and status.");
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, n] : requests_)
      out += "deepinfer_requests_total{endpoint=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"} " +
             std::to_string(n) + "\n";
  }
  header(out, "deepinfer_prompt_tokens_total", "counter", "Prompt tokens processed.");
  out += "deepinfer_prompt_tokens_total " + std::to_string(prompt_tokens.load()) + "\n";
  header(out, "deepinfer_generation_tokens_total", "counter", "Tokens generated.");
  out += "deepinfer_generation_tokens_total " + std::to_string(generation_tokens.load()) + "\n";
  header(out, "deepinfer_cached_prompt_tokens_total", "counter", "Prompt tokens served from the prefix cache.");
  out += "deepinfer_cached_prompt_tokens_total " + std::to_string(cached_prompt_tokens.load()) + "\n";
  header(out, "deepinfer_time_to_first_token_seconds", "histogram", "Time from request arrival to its first token.");
  time_to_first_token.render("deepinfer_time_to_first_token_seconds", out);
  header(out, "deepinfer_inter_token_latency_seconds", "histogram", "Time between consecutive tokens of a request.");
  inter_token_latency.render("deepinfer_inter_token_latency_seconds", out);
  header(out, "deepinfer_e2e_request_latency_seconds", "histogram", "Time from request arrival to its last token.");
  e2e_latency.render("deepinfer_e2e_request_latency_seconds", out);
  header(out, "deepinfer_num_requests_waiting", "gauge", "Requests waiting to be scheduled.");
  out += "deepinfer_num_requests_waiting " + std::to_string(g.n_waiting) + "\n";
  header(out, "deepinfer_num_requests_running", "gauge", "Sequences running in the engine.");
  out += "deepinfer_num_requests_running " + std::to_string(g.n_running) + "\n";
  header(out, "deepinfer_kv_cache_usage_ratio", "gauge", "Fraction of KV cache blocks in use.");
  out += "deepinfer_kv_cache_usage_ratio " + number(g.kv_usage) + "\n";
  header(out, "deepinfer_prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.");
  out += "deepinfer_prefix_cache_queries_total " + std::to_string(g.prefix_cache_queries) + "\n";
  header(out, "deepinfer_prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.");
  out += "deepinfer_prefix_cache_hits_total " + std::to_string(g.prefix_cache_hits) + "\n";
  header(out, "deepinfer_prefix_cache_hit_rate", "gauge", "Prefix cache hits over queries since start.");
  out += "deepinfer_prefix_cache_hit_rate " +
         number(g.prefix_cache_queries ? double(g.prefix_cache_hits) / double(g.prefix_cache_queries) : 0.0) + "\n";
  header(out, "deepinfer_spec_decode_draft_tokens_total", "counter", "Speculative draft tokens verified.");
  out += "deepinfer_spec_decode_draft_tokens_total " + std::to_string(g.spec_draft_tokens) + "\n";
  header(out, "deepinfer_spec_decode_accepted_tokens_total", "counter", "Speculative draft tokens accepted.");
  out += "deepinfer_spec_decode_accepted_tokens_total " + std::to_string(g.spec_accepted_tokens) + "\n";
  // Per draft position, up to the last one ever drafted (position 0: each step's first draft).
  header(out, "deepinfer_spec_decode_draft_tokens_per_pos_total", "counter",
         "Speculative draft tokens verified at each draft position.");
  for (size_t i = 0; i < g.spec_drafts_at.size() && g.spec_drafts_at[i] > 0; ++i)
    out += "deepinfer_spec_decode_draft_tokens_per_pos_total{position=\"" + std::to_string(i) + "\"} " +
           std::to_string(g.spec_drafts_at[i]) + "\n";
  header(out, "deepinfer_spec_decode_accepted_tokens_per_pos_total", "counter",
         "Speculative draft tokens accepted at each draft position.");
  for (size_t i = 0; i < g.spec_accepted_at.size() && i < g.spec_drafts_at.size() && g.spec_drafts_at[i] > 0; ++i)
    out += "deepinfer_spec_decode_accepted_tokens_per_pos_total{position=\"" + std::to_string(i) + "\"} " +
           std::to_string(g.spec_accepted_at[i]) + "\n";
  header(out, "deepinfer_open_connections", "gauge", "Open HTTP connections.");
  out += "deepinfer_open_connections " + std::to_string(g.open_connections) + "\n";
  return out;
}

}  // namespace deepinfer
