#include "dist/router/worker_registry.h"

#include <algorithm>

#include "dist/router/least_load.h"

namespace deepinfer::router {
namespace {

bool contains(const std::vector<size_t>& ids, size_t id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); }

WorkerRegistry::Clock::duration seconds(double s) {
  return std::chrono::duration_cast<WorkerRegistry::Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

const char* role_name(WorkerRole role) { return role == WorkerRole::kPrefill ? "prefill" : "decode"; }

WorkerRegistry::WorkerRegistry(const std::vector<std::string>& prefill_urls, const std::vector<std::string>& decode_urls,
                               BackoffSchedule backoff, int n_virtual_nodes)
    : backoff_(backoff), prefill_ring_(n_virtual_nodes) {
  auto add = [&](const std::string& url, WorkerRole role) {
    Worker w;
    w.url = url;
    w.role = role;
    workers_.push_back(std::move(w));
  };
  for (const auto& url : prefill_urls) {
    add(url, WorkerRole::kPrefill);
    prefill_ring_.add(url);
  }
  for (const auto& url : decode_urls) add(url, WorkerRole::kDecode);
}

std::optional<size_t> WorkerRegistry::acquire_decode(const std::vector<size_t>& excluded) {
  std::lock_guard lock(mu_);
  std::vector<size_t> ids;
  std::vector<DecodeCandidate> candidates;
  for (size_t i = 0; i < workers_.size(); ++i) {
    const Worker& w = workers_[i];
    if (w.role != WorkerRole::kDecode || !usable(w) || contains(excluded, i)) continue;
    ids.push_back(i);
    candidates.push_back({w.has_load ? w.load : WorkerLoad{}, w.n_in_flight, w.has_load ? w.n_in_flight_at_poll : 0});
  }
  const auto pick = least_loaded(candidates, round_robin_++);
  if (!pick) return std::nullopt;
  Worker& w = workers_[ids[*pick]];
  ++w.n_in_flight, ++w.n_requests;
  return ids[*pick];
}

std::optional<size_t> WorkerRegistry::find_prefill_locked(uint64_t key, const std::vector<size_t>& excluded) const {
  const auto url = prefill_ring_.pick(key, [&](const std::string& u) {
    for (size_t i = 0; i < workers_.size(); ++i)
      if (workers_[i].role == WorkerRole::kPrefill && workers_[i].url == u) return usable(workers_[i]) && !contains(excluded, i);
    return false;
  });
  if (!url) return std::nullopt;
  for (size_t i = 0; i < workers_.size(); ++i)
    if (workers_[i].role == WorkerRole::kPrefill && workers_[i].url == *url) return i;
  return std::nullopt;
}

std::optional<size_t> WorkerRegistry::acquire_prefill(uint64_t affinity_key, const std::vector<size_t>& excluded) {
  std::lock_guard lock(mu_);
  const auto id = find_prefill_locked(affinity_key, excluded);
  if (id) ++workers_[*id].n_in_flight, ++workers_[*id].n_requests;
  return id;
}

bool WorkerRegistry::prefill_available(const std::vector<size_t>& excluded) const {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < workers_.size(); ++i)
    if (workers_[i].role == WorkerRole::kPrefill && usable(workers_[i]) && !contains(excluded, i)) return true;
  return false;
}

void WorkerRegistry::release(size_t id) {
  std::lock_guard lock(mu_);
  --workers_[id].n_in_flight;
}

void WorkerRegistry::report_failure(size_t id, Clock::time_point now) {
  std::lock_guard lock(mu_);
  Worker& w = workers_[id];
  if (!w.healthy && w.n_failures > 0) return;  // already down: its checks keep their schedule
  w.healthy = false;
  w.n_failures = 1;
  w.next_check = now + seconds(backoff_.delay_s(w.n_failures));
}

std::vector<size_t> WorkerRegistry::due_checks(Clock::time_point now) {
  std::lock_guard lock(mu_);
  std::vector<size_t> due;
  for (size_t i = 0; i < workers_.size(); ++i) {
    Worker& w = workers_[i];
    if (w.checking || w.next_check > now) continue;
    w.checking = true;
    due.push_back(i);
  }
  return due;
}

void WorkerRegistry::report_check(size_t id, bool healthy, const std::optional<WorkerLoad>& load, Clock::time_point now) {
  std::lock_guard lock(mu_);
  Worker& w = workers_[id];
  w.checking = false;
  w.healthy = healthy;
  w.n_failures = healthy ? 0 : w.n_failures + 1;
  if (load) {
    w.has_load = true;
    w.load = *load;
    w.n_in_flight_at_poll = w.n_in_flight;
  }
  w.next_check = now + seconds(backoff_.delay_s(w.n_failures));
}

bool WorkerRegistry::set_draining(const std::string& url, bool draining) {
  std::lock_guard lock(mu_);
  bool found = false;
  for (Worker& w : workers_)
    if (w.url == url) w.draining = draining, found = true;
  return found;
}

bool WorkerRegistry::serving(WorkerRole role) const {
  std::lock_guard lock(mu_);
  for (const Worker& w : workers_)
    if (w.role == role && usable(w)) return true;
  return false;
}

std::vector<WorkerSnapshot> WorkerRegistry::snapshot() const {
  std::lock_guard lock(mu_);
  std::vector<WorkerSnapshot> out;
  for (const Worker& w : workers_)
    out.push_back(WorkerSnapshot{w.url, w.role, w.healthy, w.draining, w.n_failures, w.has_load, w.load, w.n_in_flight,
                                 w.n_requests});
  return out;
}

}  // namespace deepinfer::router
