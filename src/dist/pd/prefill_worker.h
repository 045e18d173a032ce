// PrefillWorker: the prefill role's control routes (pd_messages.h) over this process's Engine and
// KvTransferAgent.
//
//   POST /internal/pd/v1/prefill: runs the request's tokens (the prompt's first h whole blocks
//     and one more token) through the engine as a one-token greedy request, so its blocks are
//     computed and filed in the prefix cache (repeats are prefix hits), pins the wanted blocks
//     (EngineCore::pin_prefix) and answers a PrefillGrant: their ids, the agent's address and
//     rkeys, and a lease. 400: malformed; 409: layout mismatch, duplicate or dropped transfer;
//     503: the engine could not compute or pin in time; 504: past the timeout.
//   POST /internal/pd/v1/release: ends a transfer. Leased: the pins go (ack lease_held = 1 while
//     the lease ran); computing: it is dropped (its engine request aborted, nothing is pinned
//     afterwards); unknown or expired: ack lease_held = 0.
//
// Leases: granted blocks stay pinned until the release or the lease's end, whichever comes
// first; a reaper thread unpins expired ones (a decode worker that died or stalled), so no block
// stays pinned for longer than the lease. A decode worker uses the bytes only when the ack says
// the lease held (kv_transfer_agent.h has the whole argument).
//
// The control routes need no API key (decode workers call them); like every route they listen
// where --host says (loopback by default), and what a caller can pin is bounded by the lease.
//
// Threads: handle() runs on the server's request workers and blocks one for at most the timeout;
// engine state is touched only on the engine thread (Engine::post).
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "dist/pd/kv_transfer_agent.h"
#include "dist/pd/pd_messages.h"
#include "dist/pd/pd_options.h"
#include "engine/engine.h"
#include "server/http_server.h"

namespace deepinfer::pd {

class PrefillWorker {
 public:
  // `engine` and `agent` outlive the worker.
  PrefillWorker(Engine& engine, KvTransferAgent& agent, PdOptions options);
  // Unpins every lease still held, and waits (30 s at most) until the engine has run the tasks
  // this worker posted.
  ~PrefillWorker();

  void handle(const HttpRequest& request, const std::shared_ptr<HttpResponder>& res, const std::string& path);
  // Prometheus text: transfers, blocks and bytes granted and released, failures, seconds, leases.
  std::string metrics() const;

 private:
  enum class State { kComputing, kLeased, kDropped };
  struct Transfer {
    State state = State::kComputing;
    std::optional<uint64_t> engine_request;  // while computing
    std::vector<PinnedBlock> pins;           // while leased
    std::chrono::steady_clock::time_point start, lease_end;
    uint64_t n_bytes = 0;                    // of the pinned blocks
  };

  void prefill(const HttpRequest& request, const std::shared_ptr<HttpResponder>& res);
  void release(const HttpRequest& request, const std::shared_ptr<HttpResponder>& res);
  // Computes and pins; the grant's blocks, or the HTTP status and message to answer.
  std::variant<std::vector<PinnedBlock>, std::pair<int, std::string>> compute_and_pin(
      uint64_t id, const std::shared_ptr<Transfer>& t, const PrefillRequest& m, std::chrono::steady_clock::time_point deadline);
  void reap_loop();
  void count_failure();

  Engine& engine_;
  KvTransferAgent& agent_;
  PdOptions options_;
  KvLayout layout_;

  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;  // the reaper's
  // Woken by the engine's output callbacks, which may outlive this object (hence shared).
  std::shared_ptr<std::condition_variable> wake_ = std::make_shared<std::condition_variable>();
  std::map<uint64_t, std::shared_ptr<Transfer>> transfers_;
  bool stopping_ = false;
  uint64_t n_granted_ = 0, n_released_ = 0, n_failed_ = 0, n_expired_ = 0, n_blocks_ = 0, n_bytes_ = 0;
  double seconds_ = 0;

  std::thread reaper_;  // last
};

}  // namespace deepinfer::pd
