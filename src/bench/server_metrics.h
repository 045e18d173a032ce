// ServerMetrics: the few numbers the benchmark reads from a server's Prometheus /metrics page,
// recognized by name across engines. A metric's name is matched after any "namespace:" prefix
// (vllm:, sglang:, llamacpp:, deepinfer:, ...) and a trailing "_total"; values of one metric with
// several label sets (models, data-parallel ranks) are summed, except ratios, which are averaged.
//   KV-cache usage, a fraction of capacity in [0, 1]:
//     kv_cache_usage_perc, gpu_cache_usage_perc (vLLM; fractions despite the name),
//     kv_cache_usage_ratio (llama.cpp, DeepInfer), token_usage (SGLang)
//   prefix-cache counters, in tokens: prefix_cache_queries, prefix_cache_hits (vLLM, DeepInfer)
//   prefix-cache hit-rate gauge, a fraction: prefix_cache_hit_rate, gpu_prefix_cache_hit_rate,
//     cache_hit_rate (SGLang)
#pragma once

#include <optional>
#include <string_view>

namespace deepinfer::bench {

struct ServerMetrics {
  std::optional<double> kv_usage;          // fraction
  std::optional<double> prefix_queries;    // tokens looked up, cumulative
  std::optional<double> prefix_hits;       // tokens found, cumulative
  std::optional<double> prefix_hit_rate;   // fraction, as the server computes it

  bool empty() const { return !kv_usage && !prefix_queries && !prefix_hits && !prefix_hit_rate; }
};

// Parses Prometheus text exposition format; lines it does not understand are skipped.
ServerMetrics parse_server_metrics(std::string_view text);

}  // namespace deepinfer::bench
