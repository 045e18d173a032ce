#include "dist/pd/kv_transfer_agent.h"

#include <poll.h>
#include <ucp/api/ucp.h>

#include <cstring>

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
  for (void* req : closing_) ucp_request_free(req);  // released by UCX once complete
}

void KvTransferAgent::progress_loop() {
  while (!stopping_.load()) {
    {
      std::lock_guard lock(closing_mu_);
      for (size_t i = 0; i < closing_.size();) {
        if (ucp_request_check_status(closing_[i]) == UCS_INPROGRESS) {
          ++i;
          continue;
        }
        ucp_request_free(closing_[i]);
        closing_[i] = closing_.back();
        closing_.pop_back();
      }
    }
    if (ucp_worker_progress(ucx_->worker) != 0) continue;
    if (ucp_worker_arm(ucx_->worker) != UCS_OK) continue;  // busy: events arrived meanwhile
    pollfd fd{ucx_->event_fd, POLLIN, 0};
    poll(&fd, 1, 20);  // bounded, so a missed signal costs at most this
  }
}

TransferTotals KvTransferAgent::totals() const {
  return {n_reads_.load(), n_failed_.load(), n_blocks_.load(), n_bytes_.load(), double(nanoseconds_.load()) * 1e-9};
}

Status KvTransferAgent::read(const std::string& peer_address, const std::vector<RemoteKind>& remote,
                             const KvLayout& remote_layout, std::span<const BlockRead> reads,
                             std::chrono::steady_clock::time_point deadline) {
  const auto start = std::chrono::steady_clock::now();
  ucp_worker_h worker = ucx_->worker;
  EndpointState state;
  ucp_ep_params_t ep_params{};
  ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                         UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep_params.address = reinterpret_cast<const ucp_address_t*>(peer_address.data());
  ep_params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep_params.err_handler.cb = on_endpoint_error;
  ep_params.err_handler.arg = &state;
  ucp_ep_h ep = nullptr;
  std::vector<ucp_rkey_h> rkeys;
  std::vector<void*> pending;  // requests not known complete
  Status result;
  uint64_t n_bytes = 0;

  auto wait_all = [&]() -> Status {
    for (;;) {
      for (size_t i = 0; i < pending.size();) {
        const ucs_status_t s = ucp_request_check_status(pending[i]);
        if (s == UCS_INPROGRESS) {
          ++i;
          continue;
        }
        ucp_request_free(pending[i]);
        pending[i] = pending.back();
        pending.pop_back();
        if (s != UCS_OK) return ucx_error("reading from the peer", s);
      }
      if (const ucs_status_t e = state.error.load(); e != UCS_OK) return ucx_error("the peer failed", e);
      if (pending.empty()) return Status::Ok();
      if (std::chrono::steady_clock::now() >= deadline) return Status::Error("UCX: the transfer passed its deadline");
      if (ucp_worker_progress(worker) == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  };

  if (ucs_status_t s = ucp_ep_create(worker, &ep_params, &ep); s != UCS_OK) {
    result = ucx_error("connecting to the peer", s);
    ep = nullptr;
  }
  for (size_t k = 0; result.ok() && k < remote.size(); ++k) {
    ucp_rkey_h rkey = nullptr;
    if (ucs_status_t s = ucp_ep_rkey_unpack(ep, remote[k].rkey.data(), &rkey); s != UCS_OK) {
      result = ucx_error("unpacking kind " + std::to_string(k) + "'s rkey", s);
    } else {
      rkeys.push_back(rkey);
    }
  }
  ucp_request_param_t param{};
  for (size_t i = 0; result.ok() && i < reads.size(); ++i) {
    const BlockRead& r = reads[i];
    const KvKindView& local = cache_.kinds[r.kind];
    const KvKindLayout& peer = remote_layout.kinds[r.kind];
    for (size_t s = 0; s < local.slab_base.size() && result.ok(); ++s) {
      const uint64_t addr = remote[r.kind].base + (uint64_t(s) * peer.n_blocks + uint64_t(r.remote)) * peer.bytes_per_block;
      ucs_status_ptr_t req = ucp_get_nbx(ep, local.block(int(s), r.local), local.bytes_per_block, addr, rkeys[r.kind], &param);
      if (UCS_PTR_IS_ERR(req)) {
        result = ucx_error("ucp_get_nbx", UCS_PTR_STATUS(req));
      } else if (req != nullptr) {
        pending.push_back(req);
      }
      n_bytes += local.bytes_per_block;
    }
  }
  if (result.ok()) {
    ucs_status_ptr_t flush = ucp_ep_flush_nbx(ep, &param);
    if (UCS_PTR_IS_ERR(flush)) {
      result = ucx_error("ucp_ep_flush_nbx", UCS_PTR_STATUS(flush));
    } else if (flush != nullptr) {
      pending.push_back(flush);
    }
  }
  if (result.ok()) result = wait_all();

  if (result.ok()) {
    // Every get is complete (the flush returned): close politely, so the peer sees an orderly
    // disconnect; a peer too slow to answer leaves the close to the progress thread.
    for (ucp_rkey_h rkey : rkeys) ucp_rkey_destroy(rkey);
    ucp_request_param_t close{};
    ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &close);
    if (UCS_PTR_IS_PTR(req)) {
      const auto give_up = std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(1));
      while (ucp_request_check_status(req) == UCS_INPROGRESS && std::chrono::steady_clock::now() < give_up)
        if (ucp_worker_progress(worker) == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));
      if (ucp_request_check_status(req) == UCS_INPROGRESS) {
        std::lock_guard lock(closing_mu_);
        closing_.push_back(req);
      } else {
        ucp_request_free(req);
      }
    }
  } else {
    // Nothing may stay in flight: close the endpoint forcibly (no handshake: the peer may be dead
    // or stopped), which completes every operation still on it with an error, and wait for the
    // close, which completes locally; only then release the requests and the rkeys.
    if (ep) {
      ucp_request_param_t close{};
      close.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      close.flags = UCP_EP_CLOSE_FLAG_FORCE;
      ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &close);
      if (UCS_PTR_IS_PTR(req)) {
        while (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_worker_progress(worker);
        ucp_request_free(req);
      }
    }
    for (void* req : pending) {
      while (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_worker_progress(worker);
      ucp_request_free(req);
    }
    for (ucp_rkey_h rkey : rkeys) ucp_rkey_destroy(rkey);
  }

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
