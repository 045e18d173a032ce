// ServerMetrics: the few numbers the benchmark reads from a server's Prometheus /metrics page,
// recognized by the end of their names across engines: a name matches a suffix when it equals it
// or ends in "_" or ":" plus it (vllm:..., sglang:..., llamacpp:..., deepinfer_...), after
// dropping a trailing "_total". Values of one metric with several label sets (models,
// data-parallel ranks) are summed, except ratios, which are averaged.
//   KV-cache usage, a fraction of capacity in [0, 1]:
//     kv_cache_usage_ratio (DeepInfer, llama.cpp), kv_cache_usage_perc, gpu_cache_usage_perc
//     (vLLM; fractions despite the name), token_usage (SGLang)
//   prefix-cache counters, in tokens: prefix_cache_queries and prefix_cache_hits (vLLM); else
//     prompt_tokens and cached_prompt_tokens (DeepInfer), when the latter exists
//   prefix-cache hit-rate gauge, a fraction: prefix_cache_hit_rate, cache_hit_rate (SGLang)
//   speculative decoding counters, in tokens: spec_decode_draft_tokens and
//     spec_decode_accepted_tokens (DeepInfer), spec_decode_num_draft_tokens and
//     spec_decode_num_accepted_tokens (vLLM); per draft position (label position="i", 0: a
//     step's first draft): spec_decode_draft_tokens_per_pos (DeepInfer; a step drafts at
//     position 0 whenever it drafts) and spec_decode_accepted_tokens_per_pos,
//     spec_decode_num_accepted_tokens_per_pos (vLLM); drafting steps: spec_decode_num_drafts (vLLM)
#pragma once

#include <optional>
#include <string_view>
#include <vector>

namespace deepinfer::bench {

struct ServerMetrics {
  std::optional<double> kv_usage;          // fraction
  std::optional<double> prefix_queries;    // tokens looked up, cumulative
  std::optional<double> prefix_hits;       // tokens found, cumulative
  std::optional<double> prefix_hit_rate;   // fraction, as the server computes it
  // Speculative decoding, cumulative; empty vectors where the server has no per-position counts.
  std::optional<double> spec_draft_tokens;     // drafts verified
  std::optional<double> spec_accepted_tokens;  // of those, accepted
  std::optional<double> spec_drafts;           // sequence-steps that drafted (vLLM's num_drafts)
  std::vector<double> spec_draft_tokens_at, spec_accepted_tokens_at;  // [position]

  bool empty() const {
    return !kv_usage && !prefix_queries && !prefix_hits && !prefix_hit_rate && !spec_draft_tokens;
  }
};

// Parses Prometheus text exposition format; lines it does not understand are skipped.
ServerMetrics parse_server_metrics(std::string_view text);

}  // namespace deepinfer::bench
