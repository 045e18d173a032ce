// RunReport: one load run's results, from its records and metric scrapes; as JSON and as text.
//
// Definitions (times in ms; only successful requests count toward latencies and throughput):
//   TTFT  sent -> first chunk carrying output
//   ITL   the gaps between consecutive output chunks, pooled over all requests
//   TPOT  per request, (E2E - TTFT) / (output tokens - 1), for requests with >= 2 tokens
//   E2E   sent -> response complete
//   per-user output tokens/s: per request 1000 / TPOT, the decode speed its user sees; P10 is
//         the slow tail
//   throughput: tokens (usage) or requests divided by the run's duration, first request sent to
//         last response complete; per GPU divides by n_gpus
//   prefix-cache hit rate: the server's hit/query token counters over the run, else the mean of
//         its hit-rate gauge; KV-cache usage: mean and max of the samples taken during the load
//   speculative decoding: the server's counters over the run (last scrape minus first): draft
//         tokens verified and accepted, acceptance rate = accepted / drafted, accept length =
//         1 + accepted / drafting steps (tokens a drafting step yields per sequence; steps from
//         vLLM's num_drafts, else the drafts at position 0), and per draft position i the rate
//         accepted_i / drafted_i (a draft is accepted only after every one before it)
#pragma once

#include "bench/load_driver.h"
#include "bench/percentiles.h"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace deepinfer::bench {

struct SpeculativeFigures {
  double draft_tokens = 0;
  double accepted_tokens = 0;
  std::optional<double> acceptance_rate;  // null without drafts
  std::optional<double> accept_length;    // null without drafts or a count of drafting steps
  std::vector<double> draft_tokens_at, accepted_tokens_at;  // [position], where the server counts them
};

struct RunReport {
  std::string label;
  nlohmann::json load;  // how the load was applied (mode, concurrency or rate, ...)
  double duration_s = 0;
  long n_completed = 0;
  long n_failed = 0;
  std::map<std::string, long> errors;  // kind -> count
  long n_without_usage = 0;            // completed requests whose token counts are estimates
  long n_tokens_in = 0;
  long n_tokens_out = 0;
  double requests_per_s = 0;
  double output_tokens_per_s = 0;
  double total_tokens_per_s = 0;
  double output_tokens_per_s_per_gpu = 0;
  Percentiles ttft_ms, tpot_ms, itl_ms, e2e_ms, user_tokens_per_s;
  std::optional<double> prefix_cache_hit_rate, kv_usage_mean, kv_usage_max;
  std::optional<SpeculativeFigures> speculative;  // absent where the server counts no drafts
  std::string metrics_note;  // why server metrics are missing, if they are
};

RunReport make_report(const LoadResult& result, std::string label, nlohmann::json load, int n_gpus);
nlohmann::json to_json(const RunReport& report);
// A block per run, for people.
std::string format_report(const RunReport& report);
// One line per run: the sweep at a glance.
std::string format_sweep(const std::vector<RunReport>& reports);

}  // namespace deepinfer::bench
