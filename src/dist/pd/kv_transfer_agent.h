// KvTransferAgent: the KV data plane between prefill and decode workers over UCX (UCP), one per
// process. It registers every kind's memory of the local KV cache (ucp_mem_map over the cache's
// existing mappings: kind k's slab s, block b at base + (s * n_blocks + b) * bytes_per_block),
// publishes the worker's address and a packed rkey per kind (for PrefillGrant), and reads blocks
// from a peer's registered memory with one-sided ucp_get_nbx. UCX picks the transport (shared
// memory, TCP, RDMA). A thread of the agent's own progresses the worker (the target side of some
// transports needs it), waiting on the worker's event fd when idle; the engine thread never calls in.
//
// Safety: decode pulls (the design's choice), so only this process ever writes its memory, and
// only inside read(): read() returns only once none of its gets is in flight any more, after
// success, error or deadline alike (after success a flush of the endpoint has completed them; on
// failure the endpoint is closed with UCP_EP_CLOSE_FLAG_FORCE, which completes every operation
// still on it with an error, and the close is waited for), so the caller may free or reuse the
// destination blocks at once. Endpoints stay open between reads (one per peer worker address,
// shared by concurrent reads); a failure closes the peer's endpoint, failing the other reads on
// it too, and the next read connects afresh. The source side is guarded by the prefill worker's lease (its
// blocks stay pinned until decode's Release or the lease's end), and decode uses the bytes only
// if the Release's ack confirms that the lease held until after read() returned (pd_messages.h).
// Peer failures surface as errors (UCP_ERR_HANDLING_MODE_PEER) and every wait is bounded by the
// caller's deadline.
//
// Threads: read() may be called from several threads at once (the worker runs in
// UCS_THREAD_MODE_MULTI); it blocks the calling thread until its deadline at the most.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "dist/pd/pd_messages.h"
#include "model/forward_batch.h"

namespace deepinfer::pd {

// One block to copy: every slab of the peer's block `remote` of `kind` into local block `local`.
struct BlockRead {
  uint32_t kind = 0;
  int32_t remote = 0;
  int32_t local = 0;
};

struct TransferTotals {
  uint64_t n_reads = 0;  // read() calls
  uint64_t n_failed = 0;
  uint64_t n_blocks = 0;  // moved by successful reads
  uint64_t n_bytes = 0;
  double seconds = 0;    // in read(), successful or not
};

class KvTransferAgent {
 public:
  // Registers `cache` (which must outlive the agent) and starts the progress thread.
  static Result<std::unique_ptr<KvTransferAgent>> create(const KvCacheView& cache);
  ~KvTransferAgent();
  KvTransferAgent(const KvTransferAgent&) = delete;
  KvTransferAgent& operator=(const KvTransferAgent&) = delete;

  const std::string& worker_address() const { return address_; }
  const std::vector<RemoteKind>& remote_kinds() const { return remote_kinds_; }

  // Copies `reads` from the peer (its worker address, registered kinds, and layout giving each
  // kind's n_blocks, slabs and bytes per block; check_grant validated them against this cache) into
  // this cache. Ok once every byte is here; an error naming the failure otherwise. Either way no
  // operation is in flight when it returns.
  Status read(const std::string& peer_address, const std::vector<RemoteKind>& remote, const KvLayout& remote_layout,
              std::span<const BlockRead> reads, std::chrono::steady_clock::time_point deadline);

  TransferTotals totals() const;

 private:
  struct Ucx;
  KvTransferAgent(std::unique_ptr<Ucx> ucx, const KvCacheView& cache);
  void progress_loop();

  std::unique_ptr<Ucx> ucx_;
  const KvCacheView& cache_;
  std::string address_;
  std::vector<RemoteKind> remote_kinds_;
  struct Peer;
  // The peer at `address`, connected (or reused) with `remote`'s rkeys unpacked, counted as used.
  Result<std::shared_ptr<Peer>> join_peer(const std::string& address, const std::vector<RemoteKind>& remote);
  void leave_peer(const std::shared_ptr<Peer>& peer);
  void close_peer(Peer& peer);

  std::mutex peers_mu_;
  std::map<std::string, std::shared_ptr<Peer>> peers_;  // by worker address: endpoints stay open between reads
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> n_reads_{0}, n_failed_{0}, n_blocks_{0}, n_bytes_{0}, nanoseconds_{0};
  std::thread progress_;
};

}  // namespace deepinfer::pd
