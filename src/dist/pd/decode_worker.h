// DecodeWorker: the decode role's side of a remote prefill (PdHooks::fetch_prefix). For a prompt of
// n tokens it wants the leading h = (n - 1) / block_size blocks (the last token is always computed
// here, so sampling stays local and the request is admitted as a prefix hit of h blocks):
//
//   1. on the engine thread, pin what this prefix cache holds of them and reserve fresh blocks
//      for the rest (EngineCore::reserve_prefix); nothing lacking: done, no transfer;
//   2. PrefillRequest to the prefill worker (its tokens, the lacking blocks) -> PrefillGrant;
//   3. read the granted blocks into the reserved ones (KvTransferAgent::read, ucp_get);
//   4. Release(completed) -> ReleaseAck; only if the lease held are the bytes trusted;
//   5. on the engine thread, file them under their hashes (EngineCore::import_prefix).
//
// Every step shares one deadline (PdOptions::timeout_seconds). On any failure, or when the client
// goes, the reserved and pinned blocks are released on the engine thread (the read has nothing in
// flight by then), a best-effort Release(abort) tells the prefill worker to drop the transfer, and
// the error reaches the client as 503 with X-DeepInfer-Retry: prefill. Prompts shorter than
// min_prefill_tokens, and moments when the pools lack free blocks, are computed here (no pins).
//
// Trust: every message from the prefill worker is validated (pd_messages.h), but its UCX worker
// address is handed to UCX, which parses it: prefill workers are the ones the router names.
//
// Threads: fetch_prefix runs on a request worker, blocking it until the deadline at most.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "dist/pd/kv_transfer_agent.h"
#include "dist/pd/pd_http_client.h"
#include "dist/pd/pd_messages.h"
#include "dist/pd/pd_options.h"
#include "engine/engine.h"

namespace deepinfer::pd {

class DecodeWorker {
 public:
  DecodeWorker(Engine& engine, KvTransferAgent& agent, PdOptions options);

  // Errors about the URL itself carry the field "X-DeepInfer-Prefill-Url" (a bad request, not a
  // failed prefill).
  Result<std::vector<PinnedBlock>> fetch_prefix(const std::string& prefill_url, const std::vector<int32_t>& prompt,
                                                const std::function<bool()>& cancelled);
  // Prometheus text: remote prefills, blocks and bytes received, failures, seconds, blocks held.
  std::string metrics() const;

 private:
  Result<std::vector<PinnedBlock>> transfer(const PeerUrl& peer, const std::vector<int32_t>& prompt, int h,
                                            const PrefixReservation& reservation, std::chrono::steady_clock::time_point deadline,
                                            const std::function<bool()>& cancelled);

  Engine& engine_;
  KvTransferAgent& agent_;
  PdOptions options_;
  KvLayout layout_;
  std::atomic<uint64_t> next_transfer_;

  mutable std::mutex mu_;  // guards the counters
  uint64_t n_remote_ = 0, n_local_ = 0, n_failed_ = 0, n_blocks_ = 0, n_bytes_ = 0, n_hit_blocks_ = 0;
  double seconds_ = 0;
};

}  // namespace deepinfer::pd
