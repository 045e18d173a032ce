// Metrics in the Prometheus text exposition format: counters, gauges and histograms, updated
// from any thread and rendered by GET /metrics. Names carry the `deepinfer_` prefix.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace deepinfer {

// Appends one sample with its HELP and TYPE lines: `name{labels} value` (labels without braces,
// e.g. `role="decode"`; empty for none), the value at full double precision.
void append_metric(std::string& out, const std::string& name, const char* type, const char* help,
                   const std::string& labels, double value);

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);  // upper bounds, ascending; +Inf is implicit
  void observe(double v);
  // Appends `name_bucket{le=...}`, `name_sum`, `name_count` lines.
  void render(const std::string& name, std::string& out) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();

  void count_request(const std::string& endpoint, int status);  // by endpoint and HTTP status
  std::atomic<uint64_t> prompt_tokens{0};
  std::atomic<uint64_t> generation_tokens{0};
  std::atomic<uint64_t> cached_prompt_tokens{0};
  Histogram time_to_first_token;    // seconds
  Histogram inter_token_latency;    // seconds
  Histogram e2e_latency;            // seconds

  // Gauges sampled from the engine at render time.
  struct EngineGauges {
    size_t n_waiting = 0;
    size_t n_running = 0;
    double kv_usage = 0;            // fraction of KV blocks in use
    uint64_t prefix_cache_queries = 0;  // prompt tokens looked up in the prefix cache
    uint64_t prefix_cache_hits = 0;     // of which found
    uint64_t spec_draft_tokens = 0;     // speculative drafts verified
    uint64_t spec_accepted_tokens = 0;  // of which accepted
    std::vector<uint64_t> spec_drafts_at, spec_accepted_at;  // per draft position (EngineStats)
    size_t open_connections = 0;
  };
  std::string render(const EngineGauges& g) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
};

}  // namespace deepinfer
