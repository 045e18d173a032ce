// run_load: drives a Workload against a server and records every request.
//
// Load modes:
//   concurrency  `concurrency` conversations in progress at all times (closed loop: a user sends
//                a turn, waits for the answer and its think time, sends the next; when its
//                conversation ends it starts the next unstarted one). For single-turn workloads
//                this is "N requests in flight", the decode batch sweep's knob.
//   rate         conversations start at `rate` per second, Poisson or evenly spaced (open loop).
//   trace        conversations start at the workload's own arrival times.
// In rate and trace mode `max_concurrency` caps requests in flight; the rest queue in order, and
// a request's latencies count from when it was actually sent.
//
// Threading: the driver's state lives on one thread; requests run on `n_threads` client threads,
// each with its own io_context and connection pool, so the client is not the bottleneck at
// thousands of streams. Every run ends by itself: each request is bounded by request_timeout_s.
#pragma once

#include "bench/http_client.h"
#include "bench/openai_stream.h"
#include "bench/request_record.h"
#include "bench/server_metrics.h"
#include "bench/workload.h"
#include "core/status.h"

#include <string>
#include <vector>

namespace deepinfer::bench {

struct LoadOptions {
  enum class Mode { kConcurrency, kRate, kTrace };
  Mode mode = Mode::kConcurrency;
  int64_t concurrency = 8;      // concurrency mode: conversations in progress
  double rate = 1;              // rate mode: conversations started per second
  bool poisson = true;          // rate mode: exponential gaps (else constant)
  int64_t max_concurrency = 0;  // rate and trace mode: requests in flight at most; 0 = no cap
  uint64_t seed = 0;            // the arrival process's randomness
  int n_threads = 1;            // client threads
  double request_timeout_s = 600;
  bool scrape_metrics = true;   // read server metrics before, during and after the load
  std::string metrics_path = "/metrics";
  double metrics_interval_s = 1;
  bool show_progress = true;    // a status line on stderr
  double progress_interval_s = 1;
  std::string label;            // names the run in progress lines
};

struct MetricsSample {
  double t_s = 0;  // seconds since the load started (negative: before it)
  ServerMetrics metrics;
};

struct LoadResult {
  std::vector<RequestRecord> records;  // in completion order
  double duration_s = 0;               // first request sent -> last response complete
  // Scrapes of the metrics page: the first before the load, the last after it. Empty when the
  // server has no page (metrics_error says why) or scraping was off.
  std::vector<MetricsSample> metrics;
  std::string metrics_error;
};

Result<LoadResult> run_load(const Workload& workload, const ApiOptions& api, const Endpoint& endpoint,
                            const LoadOptions& options);

}  // namespace deepinfer::bench
