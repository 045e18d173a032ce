#include "dist/pd/kv_transfer_agent.h"

#include <poll.h>
#include <ucp/api/ucp.h>

#include <cstring>
#include <shared_mutex>

namespace deepinfer::pd {

namespace {

Status ucx_error(const std::string& what, ucs_status_t status) {
  return Status::Error("UCX: " + what + ": " + ucs_status_string(status));
}

// Set by the endpoint's error handler (peer failure), read by the thread in read().
struct EndpointState {
  std::atomic<ucs_status_t> error{UCS_OK};
};

void on_endpoint_error(void* arg, ucp_ep_h, ucs_status_t status) {
  static_cast<EndpointState*>(arg)->error.store(status);
}

}  // namespace

struct KvTransferAgent::Ucx {
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  int event_fd = -1;
  std::vector<ucp_mem_h> memory;  // [kind]

  ~Ucx() {
    for (ucp_mem_h m : memory) ucp_mem_unmap(context, m);
    if (worker) ucp_worker_destroy(worker);
    if (context) ucp_cleanup(context);
  }
};

// One peer's endpoint and unpacked rkeys, kept while it works. `guard` is held shared while
// operations are issued on the endpoint and exclusively to close it; the rkeys go once the last
// user is done after the close.
struct KvTransferAgent::Peer {
  ucp_ep_h ep = nullptr;
  EndpointState state;  // the endpoint's error handler writes here
  std::vector<std::string> packed;  // [kind] rkeys as the peer packed them
  std::vector<ucp_rkey_h> rkeys;    // [kind]
  std::shared_mutex guard;
  int n_users = 0;       // under peers_mu_
  bool closed = false;   // under peers_mu_
};

Result<std::unique_ptr<KvTransferAgent>> KvTransferAgent::create(const KvCacheView& cache) {
  auto ucx = std::make_unique<Ucx>();
  ucp_config_t* config = nullptr;
  if (ucs_status_t s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK) return ucx_error("reading the configuration", s);
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
  const ucs_status_t init = ucp_init(&params, config, &ucx->context);
  ucp_config_release(config);
  if (init != UCS_OK) return ucx_error("ucp_init", init);

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_MULTI;
  if (ucs_status_t s = ucp_worker_create(ucx->context, &wp, &ucx->worker); s != UCS_OK) return ucx_error("ucp_worker_create", s);
  ucp_worker_attr_t attr{};
  attr.field_mask = UCP_WORKER_ATTR_FIELD_THREAD_MODE;
  if (ucs_status_t s = ucp_worker_query(ucx->worker, &attr); s != UCS_OK) return ucx_error("ucp_worker_query", s);
  if (attr.thread_mode != UCS_THREAD_MODE_MULTI) return Status::Error("UCX: this build has no multi-threaded workers");
  if (ucs_status_t s = ucp_worker_get_efd(ucx->worker, &ucx->event_fd); s != UCS_OK) return ucx_error("ucp_worker_get_efd", s);

  std::vector<RemoteKind> remote;
  for (size_t k = 0; k < cache.kinds.size(); ++k) {
    const KvKindView& kind = cache.kinds[k];
    const size_t slab_bytes = size_t(kind.n_blocks) * kind.bytes_per_block;
    for (size_t s = 0; s < kind.slab_base.size(); ++s) {
      if (kind.slab_base[s] != kind.slab_base[0] + s * slab_bytes)
        return Status::Error("KV kind " + std::to_string(k) + ": slabs are not one mapping");
    }
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = kind.slab_base[0];
    mp.length = slab_bytes * kind.slab_base.size();
    ucp_mem_h memh = nullptr;
    if (ucs_status_t s = ucp_mem_map(ucx->context, &mp, &memh); s != UCS_OK) return ucx_error("ucp_mem_map", s);
    ucx->memory.push_back(memh);
    void* packed = nullptr;
    size_t packed_size = 0;
    if (ucs_status_t s = ucp_rkey_pack(ucx->context, memh, &packed, &packed_size); s != UCS_OK) return ucx_error("ucp_rkey_pack", s);
    remote.push_back({uint64_t(reinterpret_cast<uintptr_t>(kind.slab_base[0])), std::string(static_cast<char*>(packed), packed_size)});
    ucp_rkey_buffer_release(packed);
  }
  auto agent = std::unique_ptr<KvTransferAgent>(new KvTransferAgent(std::move(ucx), cache));
  agent->remote_kinds_ = std::move(remote);
  ucp_address_t* address = nullptr;
  size_t address_size = 0;
  if (ucs_status_t s = ucp_worker_get_address(agent->ucx_->worker, &address, &address_size); s != UCS_OK)
    return ucx_error("ucp_worker_get_address", s);
  agent->address_.assign(reinterpret_cast<const char*>(address), address_size);
  ucp_worker_release_address(agent->ucx_->worker, address);
  agent->progress_ = std::thread([a = agent.get()] { a->progress_loop(); });
  return agent;
}

KvTransferAgent::KvTransferAgent(std::unique_ptr<Ucx> ucx, const KvCacheView& cache) : ucx_(std::move(ucx)), cache_(cache) {}

KvTransferAgent::~KvTransferAgent() {
  stopping_ = true;
  if (progress_.joinable()) {
    ucp_worker_signal(ucx_->worker);
    progress_.join();
  }
  for (auto& [address, peer] : peers_) {  // no read runs any more
    close_peer(*peer);
    for (ucp_rkey_h rkey : peer->rkeys) ucp_rkey_destroy(rkey);
  }
}

void KvTransferAgent::progress_loop() {
  while (!stopping_.load()) {
    if (ucp_worker_progress(ucx_->worker) != 0) continue;
    if (ucp_worker_arm(ucx_->worker) != UCS_OK) continue;  // busy: events arrived meanwhile
    pollfd fd{ucx_->event_fd, POLLIN, 0};
    poll(&fd, 1, 20);  // bounded, so a missed signal costs at most this
  }
}

TransferTotals KvTransferAgent::totals() const {
  return {n_reads_.load(), n_failed_.load(), n_blocks_.load(), n_bytes_.load(), double(nanoseconds_.load()) * 1e-9};
}

void KvTransferAgent::close_peer(Peer& peer) {
  std::unique_lock guard(peer.guard);
  ucp_request_param_t close{};
  close.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  close.flags = UCP_EP_CLOSE_FLAG_FORCE;  // no handshake: the peer may be dead or stopped
  ucs_status_ptr_t req = ucp_ep_close_nbx(peer.ep, &close);
  if (UCS_PTR_IS_PTR(req)) {  // completes locally
    while (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_worker_progress(ucx_->worker);
    ucp_request_free(req);
  }
}

void KvTransferAgent::leave_peer(const std::shared_ptr<Peer>& peer) {
  bool last = false;
  {
    std::lock_guard lock(peers_mu_);
    last = --peer->n_users == 0 && peer->closed;
  }
  if (last)
    for (ucp_rkey_h rkey : peer->rkeys) ucp_rkey_destroy(rkey);
}

Result<std::shared_ptr<KvTransferAgent::Peer>> KvTransferAgent::join_peer(const std::string& address,
                                                                         const std::vector<RemoteKind>& remote) {
  std::vector<std::shared_ptr<Peer>> dead;  // failed peers nobody uses: closed below
  std::shared_ptr<Peer> peer;
  {
    std::lock_guard lock(peers_mu_);
    for (auto it = peers_.begin(); it != peers_.end();) {
      if (it->second->state.error.load() != UCS_OK && it->second->n_users == 0) {
        it->second->closed = true;
        dead.push_back(it->second);
        it = peers_.erase(it);
      } else {
        ++it;
      }
    }
    if (auto it = peers_.find(address); it != peers_.end()) {
      peer = it->second;
      ++peer->n_users;
    }
  }
  for (const auto& d : dead) {
    close_peer(*d);
    for (ucp_rkey_h rkey : d->rkeys) ucp_rkey_destroy(rkey);
  }
  if (peer) {
    std::vector<std::string> packed;
    for (const RemoteKind& k : remote) packed.push_back(k.rkey);
    if (packed == peer->packed) return peer;
    leave_peer(peer);
    return Status::Error("UCX: the peer's rkeys changed under the same worker address");
  }
  peer = std::make_shared<Peer>();
  ucp_ep_params_t ep_params{};
  ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                         UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep_params.address = reinterpret_cast<const ucp_address_t*>(address.data());
  ep_params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep_params.err_handler.cb = on_endpoint_error;
  ep_params.err_handler.arg = &peer->state;
  if (ucs_status_t s = ucp_ep_create(ucx_->worker, &ep_params, &peer->ep); s != UCS_OK)
    return ucx_error("connecting to the peer", s);
  for (size_t k = 0; k < remote.size(); ++k) {
    ucp_rkey_h rkey = nullptr;
    if (ucs_status_t s = ucp_ep_rkey_unpack(peer->ep, remote[k].rkey.data(), &rkey); s != UCS_OK) {
      close_peer(*peer);
      for (ucp_rkey_h r : peer->rkeys) ucp_rkey_destroy(r);
      return ucx_error("unpacking kind " + std::to_string(k) + "'s rkey", s);
    }
    peer->rkeys.push_back(rkey);
    peer->packed.push_back(remote[k].rkey);
  }
  std::shared_ptr<Peer> other;
  {
    std::lock_guard lock(peers_mu_);
    auto [it, added] = peers_.emplace(address, peer);
    if (added) {
      peer->n_users = 1;
      return peer;
    }
    other = it->second;  // another read connected meanwhile: use that one
    ++other->n_users;
  }
  close_peer(*peer);
  for (ucp_rkey_h r : peer->rkeys) ucp_rkey_destroy(r);
  return other;
}

Status KvTransferAgent::read(const std::string& peer_address, const std::vector<RemoteKind>& remote,
                             const KvLayout& remote_layout, std::span<const BlockRead> reads,
                             std::chrono::steady_clock::time_point deadline) {
  const auto start = std::chrono::steady_clock::now();
  ucp_worker_h worker = ucx_->worker;
  std::vector<void*> pending;  // requests not known complete
  uint64_t n_bytes = 0;
  auto joined = join_peer(peer_address, remote);
  Status result = joined.ok() ? Status::Ok() : joined.status();
  std::shared_ptr<Peer> peer = joined.ok() ? *joined : nullptr;

  if (peer) {
    std::shared_lock guard(peer->guard);
    ucp_request_param_t param{};
    for (size_t i = 0; result.ok() && i < reads.size(); ++i) {
      const BlockRead& r = reads[i];
      const KvKindView& local = cache_.kinds[r.kind];
      const KvKindLayout& layout = remote_layout.kinds[r.kind];
      for (size_t s = 0; s < local.slab_base.size() && result.ok(); ++s) {
        const uint64_t addr = remote[r.kind].base + (uint64_t(s) * layout.n_blocks + uint64_t(r.remote)) * layout.bytes_per_block;
        ucs_status_ptr_t req =
            ucp_get_nbx(peer->ep, local.block(int(s), r.local), local.bytes_per_block, addr, peer->rkeys[r.kind], &param);
        if (UCS_PTR_IS_ERR(req)) {
          result = ucx_error("ucp_get_nbx", UCS_PTR_STATUS(req));
        } else if (req != nullptr) {
          pending.push_back(req);
        }
        n_bytes += local.bytes_per_block;
      }
    }
    if (result.ok()) {  // completes once every operation issued on the endpoint before it has
      ucs_status_ptr_t flush = ucp_ep_flush_nbx(peer->ep, &param);
      if (UCS_PTR_IS_ERR(flush)) {
        result = ucx_error("ucp_ep_flush_nbx", UCS_PTR_STATUS(flush));
      } else if (flush != nullptr) {
        pending.push_back(flush);
      }
    }
  }
  while (result.ok() && !pending.empty()) {
    for (size_t i = 0; i < pending.size();) {
      const ucs_status_t s = ucp_request_check_status(pending[i]);
      if (s == UCS_INPROGRESS) {
        ++i;
        continue;
      }
      ucp_request_free(pending[i]);
      pending[i] = pending.back();
      pending.pop_back();
      if (s != UCS_OK) result = ucx_error("reading from the peer", s);
    }
    if (!result.ok() || pending.empty()) break;
    if (const ucs_status_t e = peer->state.error.load(); e != UCS_OK) result = ucx_error("the peer failed", e);
    else if (std::chrono::steady_clock::now() >= deadline) result = Status::Error("UCX: the transfer passed its deadline");
    else if (ucp_worker_progress(worker) == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  if (!result.ok() && peer) {
    // Nothing may stay in flight: the endpoint is closed forcibly (once, by whoever fails first),
    // which completes every operation still on it, ours and other reads' alike, with an error.
    bool close = false;
    {
      std::lock_guard lock(peers_mu_);
      if (!peer->closed) {
        peer->closed = close = true;
        if (auto it = peers_.find(peer_address); it != peers_.end() && it->second == peer) peers_.erase(it);
      }
    }
    if (close) close_peer(*peer);
    for (void* req : pending) {
      while (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_worker_progress(worker);
      ucp_request_free(req);
    }
  }
  if (peer) leave_peer(peer);

  const auto elapsed = std::chrono::steady_clock::now() - start;
  nanoseconds_ += uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count());
  ++n_reads_;
  if (result.ok()) {
    n_blocks_ += reads.size();
    n_bytes_ += n_bytes;
  } else {
    ++n_failed_;
  }
  return result;
}

}  // namespace deepinfer::pd
