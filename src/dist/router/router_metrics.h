// RouterMetrics: the router's own /metrics (Prometheus text, names prefixed deepinfer_router_):
//   deepinfer_router_requests_total{endpoint,outcome}  counter; outcomes below
//   deepinfer_router_prefill_retries_total             requests sent again with another prefill worker
//   deepinfer_router_decode_retries_total              requests sent again after a decode worker refused the connection
//   deepinfer_router_upstream_errors_total{role,url,kind}  connect, timeout, transport
//   deepinfer_router_worker_{healthy,draining,in_flight,requests_running,requests_waiting,kv_cache_usage_ratio}{role,url}
//   deepinfer_router_worker_requests_total{role,url}   requests the router sent there
//   deepinfer_router_healthy                           1 when a worker of each role can take requests
// Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "dist/router/worker_registry.h"

namespace deepinfer::router {

enum class Outcome {
  kSuccess,        // the worker's 2xx answer went to the client in full
  kWorkerError,    // the worker's own error answer (4xx/5xx) went to the client
  kRejected,       // the router refused the request (401, 404, 405, 400, 413, ...)
  kNoWorker,       // 503: no healthy decode worker
  kPrefillFailed,  // 503: every prefill worker tried failed
  kUpstreamFailed, // 502, or an error event mid-stream: the decode worker failed or timed out
  kCancelled,      // the client went before the answer was complete
};
const char* outcome_name(Outcome outcome);

class RouterMetrics {
 public:
  void count(const std::string& endpoint, Outcome outcome);
  void count_upstream_error(const std::string& role, const std::string& url, const std::string& kind);
  std::atomic<uint64_t> n_prefill_retries{0};
  std::atomic<uint64_t> n_decode_retries{0};

  std::string render(const std::vector<WorkerSnapshot>& workers, bool healthy) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, Outcome>, uint64_t> requests_;
  std::map<std::tuple<std::string, std::string, std::string>, uint64_t> upstream_errors_;
};

}  // namespace deepinfer::router
