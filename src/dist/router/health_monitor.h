// HealthMonitor: checks the workers from the UpstreamPool's thread. A worker due for a check
// (WorkerRegistry: every interval while healthy, after a growing back-off while down) gets
// GET /health, healthy on 200 within the timeout; then GET /metrics for its load. The first
// decode worker to answer GET /v1/models gives the router its model card. A worker that comes
// back (restarted) passes its next check and takes requests again.
#pragma once

#include <mutex>
#include <string>

#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "dist/router/upstream_pool.h"
#include "dist/router/worker_registry.h"

namespace deepinfer::router {

class HealthMonitor {
 public:
  // The pool must be stopped before the monitor is destroyed.
  HealthMonitor(WorkerRegistry& registry, UpstreamPool& pool, double timeout_s);
  void start();

  // The first entry of a decode worker's /v1/models `data`; null until one has answered.
  nlohmann::json model_card() const;

 private:
  void tick();
  void check(size_t id);
  void read_load(size_t id);
  void learn_model(size_t id);

  WorkerRegistry& registry_;
  UpstreamPool& pool_;
  double timeout_s_;
  boost::asio::steady_timer timer_;
  bool asking_model_ = false;  // a /v1/models request is out (pool thread only)
  mutable std::mutex mu_;
  nlohmann::json model_card_;
};

}  // namespace deepinfer::router
