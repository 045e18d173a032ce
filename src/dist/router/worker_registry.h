// WorkerRegistry: the prefill and decode workers the router sends requests to, with what it
// knows of each: health (from its checks and from failed requests, with back-off while down),
// load (from /metrics), draining, and the router's own requests in flight there. Policies:
// decode by least load (least_load.h), prefill by prefix affinity (hash_ring.h over the
// prefill workers that are healthy and not draining).
//
// Workers are numbered once, prefill first; ids, URLs and roles never change. Every method is
// thread-safe (one mutex).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dist/router/backoff.h"
#include "dist/router/hash_ring.h"
#include "dist/router/worker_load.h"

namespace deepinfer::router {

enum class WorkerRole { kPrefill, kDecode };
const char* role_name(WorkerRole role);

struct WorkerSnapshot {
  std::string url;
  WorkerRole role = WorkerRole::kDecode;
  bool healthy = false;      // its last health check (or request) succeeded
  bool draining = false;     // takes no new requests
  int n_failures = 0;        // consecutive failed checks or requests
  bool has_load = false;     // `load` was read from its /metrics
  WorkerLoad load;
  int64_t n_in_flight = 0;   // the router's requests there now
  uint64_t n_requests = 0;   // the router's requests sent there, in all
};

class WorkerRegistry {
 public:
  using Clock = std::chrono::steady_clock;

  // URLs as http://HOST:PORT (no trailing slash). Every worker starts unhealthy, due for a check.
  WorkerRegistry(const std::vector<std::string>& prefill_urls, const std::vector<std::string>& decode_urls,
                 BackoffSchedule backoff, int n_virtual_nodes);

  size_t size() const { return workers_.size(); }
  const std::string& url(size_t id) const { return workers_[id].url; }
  WorkerRole role(size_t id) const { return workers_[id].role; }

  // Picks a worker for a new request, counting it in flight there until release(); none when no
  // worker of the role is healthy, not draining and not in `excluded`.
  std::optional<size_t> acquire_decode(const std::vector<size_t>& excluded);
  std::optional<size_t> acquire_prefill(uint64_t affinity_key, const std::vector<size_t>& excluded);
  void release(size_t id);
  // Whether acquire_prefill would find a worker outside `excluded`.
  bool prefill_available(const std::vector<size_t>& excluded) const;

  // A request to the worker failed at the transport level: it is down until a check passes.
  void report_failure(size_t id, Clock::time_point now);
  // Workers due for a health check, now marked as being checked until report_check().
  std::vector<size_t> due_checks(Clock::time_point now);
  // The result of a check: reachable or not, and its load when /metrics was read.
  void report_check(size_t id, bool healthy, const std::optional<WorkerLoad>& load, Clock::time_point now);

  // Starts or stops draining every worker with this URL; false when there is none.
  bool set_draining(const std::string& url, bool draining);
  // Some worker of the role is healthy and not draining.
  bool serving(WorkerRole role) const;

  std::vector<WorkerSnapshot> snapshot() const;

 private:
  struct Worker {
    std::string url;
    WorkerRole role = WorkerRole::kDecode;
    bool healthy = false;
    bool draining = false;
    bool checking = false;
    int n_failures = 0;
    Clock::time_point next_check;
    bool has_load = false;
    WorkerLoad load;
    int64_t n_in_flight = 0;
    int64_t n_in_flight_at_poll = 0;
    uint64_t n_requests = 0;
  };
  bool usable(const Worker& w) const { return w.healthy && !w.draining; }
  std::optional<size_t> find_prefill_locked(uint64_t key, const std::vector<size_t>& excluded) const;

  const BackoffSchedule backoff_;
  mutable std::mutex mu_;
  std::vector<Worker> workers_;
  HashRing prefill_ring_;  // over prefill URLs
  size_t round_robin_ = 0; // start of the least-load scan, advanced per pick
};

}  // namespace deepinfer::router
