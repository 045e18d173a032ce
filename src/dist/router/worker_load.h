// WorkerLoad: what the router reads from a worker's /metrics (Prometheus text) to choose the
// least loaded decode worker: deepinfer_num_requests_running, deepinfer_num_requests_waiting
// (sequences) and deepinfer_kv_cache_usage_ratio (fraction of KV blocks in use).
#pragma once

#include <string_view>

#include "core/status.h"

namespace deepinfer::router {

struct WorkerLoad {
  double n_running = 0;  // sequences
  double n_waiting = 0;  // sequences
  double kv_usage = 0;   // fraction in [0, 1]
};

// The three gauges (unlabelled samples); an error names the first one missing or malformed.
Result<WorkerLoad> parse_worker_load(std::string_view metrics_text);

}  // namespace deepinfer::router
