// RouterService: the OpenAI endpoint in front of prefill and decode workers (`deepinfer
// router`). Routes:
//   POST /v1/completions, /v1/chat/completions  relayed to a decode worker (relay.h); the body
//        must be a JSON object (at most 64 levels deep), the rest the worker checks
//   GET  /v1/models   the decode workers' model card (its id: --served-model-name if given)
//   GET  /health      200 when a worker of each role is healthy and not draining, else 503
//   GET  /metrics     the router's own (router_metrics.h)
//   POST /router/drain, /router/undrain  {"url": WORKER_URL}: stop or resume new requests to
//        that worker; its requests in flight finish. Answers {"url", "draining", "in_flight"}.
// With an API key, everything but /health and /metrics needs "Authorization: Bearer KEY".
// Once draining (shutdown), everything but /metrics gets 503 while relayed requests finish.
// Errors are OpenAI error bodies. handle() may be called from any thread.
#pragma once

#include <atomic>
#include <memory>

#include "dist/router/health_monitor.h"
#include "dist/router/relay.h"
#include "dist/router/router_metrics.h"
#include "dist/router/router_options.h"
#include "dist/router/upstream_pool.h"
#include "dist/router/worker_registry.h"
#include "server/http_server.h"

namespace deepinfer::router {

class RouterService {
 public:
  // Options' URLs must parse (bench::parse_base_url); the CLI checks them.
  explicit RouterService(RouterOptions options);
  ~RouterService();  // stops the upstream thread first

  void start();  // begins the health checks
  void set_draining();
  int64_t n_active() const { return n_active_.load(); }  // relayed requests not finished
  void handle(HttpRequest request, std::shared_ptr<HttpResponder> responder);
  // Requests the HTTP server refused before handle() (413, 431, 400): counted as rejected.
  void count_rejected(const std::string& target);

 private:
  void reply_error(const std::shared_ptr<HttpResponder>& res, const std::string& endpoint, int status,
                   const std::string& message, const std::string& type, const std::string& code = "",
                   const std::string& param = "");
  void drain(const HttpRequest& req, const std::shared_ptr<HttpResponder>& res, const std::string& endpoint, bool draining);

  RouterOptions options_;
  WorkerRegistry registry_;
  RouterMetrics metrics_;
  UpstreamPool pool_;
  HealthMonitor monitor_;
  std::atomic<int64_t> n_active_{0};
  std::atomic<bool> draining_{false};
  RouterContext context_;
};

}  // namespace deepinfer::router
