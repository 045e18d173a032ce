// Relay: one client request on its way through the router (P/D contract, docs/architecture.md).
// It picks a decode worker (least load) and a prefill worker (prefix affinity), sends the
// request there unchanged (method, path, body, Content-Type) with X-DeepInfer-Prefill-Url, and
// passes the answer back:
//   - an SSE stream (2xx text/event-stream) event by event as it comes (bytes of an event not yet
//     complete are held back, up to kMaxPartialEvent), each next upstream read waiting until the
//     client's socket took the previous piece (backpressure: the router holds about one 16 KiB
//     piece per stream);
//   - any other answer whole, once complete (at most max_response_bytes, else 502), so that a
//     decode worker that fails midway gives the client a clean 502 rather than half a body.
// Faults: a 503 with X-DeepInfer-Retry: prefill is retried with another prefill worker, then a
// 503 (retry_rule.h); a refused connection is retried on another decode worker; a decode worker
// that fails or times out after the stream began ends it (after its last whole event) with an
// error event and [DONE], before
// that with a 502; either way it is marked down until a health check passes. A client that
// goes closes the upstream connection, so the worker aborts the request.
// Everything after start() runs on the UpstreamPool's thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "bench/http_client.h"
#include "dist/router/retry_rule.h"
#include "dist/router/router_metrics.h"
#include "dist/router/router_options.h"
#include "dist/router/upstream_pool.h"
#include "dist/router/worker_registry.h"
#include "server/http_server.h"

namespace deepinfer::router {

struct RouterContext {
  const RouterOptions& options;
  WorkerRegistry& registry;
  UpstreamPool& pool;
  RouterMetrics& metrics;
  std::atomic<int64_t>& n_active;  // relays created and not yet finished
};

class Relay : public std::enable_shared_from_this<Relay> {
 public:
  // `endpoint`: the metrics label; `affinity_key`: affinity_key.h of the body.
  Relay(RouterContext& ctx, HttpRequest request, std::shared_ptr<HttpResponder> responder, std::string endpoint,
        uint64_t affinity_key);
  void start();

 private:
  enum class Phase { kHead, kDiscard, kBuffer, kStream };

  void attempt();
  void on_head(const bench::HttpResponseHead& head);
  void on_body(std::string_view bytes, std::function<void()> resume);
  void on_done(const bench::HttpResult& result);
  void release_workers();
  void fail(int status, const std::string& message, const std::string& type, const std::string& code, Outcome outcome);
  // Counts the request's outcome once; called before the client can see the final answer, so a
  // client that reads /metrics right after it finds it counted.
  void count(Outcome outcome);
  // Counts (if not yet) and releases the request's place among the active ones (shutdown waits).
  void finish(Outcome outcome);

  RouterContext& ctx_;
  HttpRequest request_;
  std::shared_ptr<HttpResponder> responder_;
  std::string endpoint_;
  uint64_t affinity_key_;

  std::optional<size_t> decode_, prefill_;  // this attempt's workers
  std::vector<size_t> failed_decode_;       // refused the connection
  std::vector<size_t> failed_prefill_;      // named in a retry answer
  std::shared_ptr<bench::HttpClient::Stream> stream_;
  Phase phase_ = Phase::kHead;
  UpstreamAction action_ = UpstreamAction::kRelay;
  int status_ = 0;
  std::string content_type_;
  bench::HeaderList pass_headers_;  // response headers the client gets too
  std::string body_;                // kBuffer: the answer so far; kDiscard: the start of the retry answer
  bool too_large_ = false;
  bool client_gone_ = false;
  bool counted_ = false;
  bool finished_ = false;
  std::string partial_event_;       // kStream: bytes after the last complete event, held back
};

}  // namespace deepinfer::router
