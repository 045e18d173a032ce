#include "dist/pd/decode_worker.h"

#include <cstdio>
#include <random>

#include "dist/pd/engine_call.h"
#include "dist/pd/kv_layout.h"
#include "dist/pd/pd_http_client.h"
#include "server/metrics.h"

namespace deepinfer::pd {

namespace {

using Clock = std::chrono::steady_clock;

uint64_t random_seed() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ rd();
}

// Releases pins on the engine thread (from any thread, never waiting).
void unpin_later(Engine& engine, std::vector<PinnedBlock> pins) {
  if (!pins.empty()) engine.post([pins = std::move(pins)](EngineCore& core) { core.unpin(pins); });
}

}  // namespace

DecodeWorker::DecodeWorker(Engine& engine, KvTransferAgent& agent, PdOptions options)
    : engine_(engine),
      agent_(agent),
      options_(options),
      layout_(kv_layout_of(engine.model_info(), engine.kv_cache_info())),
      next_transfer_(random_seed()) {}

Result<std::vector<PinnedBlock>> DecodeWorker::fetch_prefix(const std::string& prefill_url,
                                                            const std::vector<int32_t>& prompt,
                                                            const std::function<bool()>& cancelled) {
  auto peer = parse_peer_url(prefill_url);
  if (!peer.ok()) return Status::Error(peer.status().message()).with_field("X-DeepInfer-Prefill-Url");
  const int block_size = int(layout_.block_size);
  const int h = (int(prompt.size()) - 1) / block_size;
  if (int(prompt.size()) < options_.min_prefill_tokens || h == 0) {
    std::lock_guard lock(mu_);
    ++n_local_;
    return std::vector<PinnedBlock>{};
  }
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.timeout_seconds));
  auto reservation = call_on_engine<std::optional<PrefixReservation>>(
      engine_, [prompt, h](EngineCore& core) { return core.reserve_prefix(prompt, h); },
      [](EngineCore& core, std::optional<PrefixReservation>& r) {
        if (r) {
          core.unpin(r->held);
          core.unpin(r->receive);
        }
      },
      deadline);
  if (!reservation) {
    std::lock_guard lock(mu_);
    ++n_failed_;
    return Status::Error("the engine did not answer before the prefill timeout");
  }
  if (!*reservation) {  // no free blocks to receive into now (or no prefix cache): compute here
    std::lock_guard lock(mu_);
    ++n_local_;
    return std::vector<PinnedBlock>{};
  }
  if ((*reservation)->receive.empty()) {  // this prefix cache holds it all
    std::lock_guard lock(mu_);
    n_hit_blocks_ += (*reservation)->held.size();
    return std::move((*reservation)->held);
  }
  auto result = transfer(*peer, prompt, h, **reservation, deadline, cancelled);
  std::lock_guard lock(mu_);
  seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
  if (!result.ok()) {
    ++n_failed_;
    return result;
  }
  ++n_remote_;
  n_hit_blocks_ += (*reservation)->held.size();
  for (const PinnedBlock& b : (*reservation)->receive) {
    ++n_blocks_;
    n_bytes_ += block_bytes(layout_, b.kind);
  }
  return result;
}

Result<std::vector<PinnedBlock>> DecodeWorker::transfer(const PeerUrl& peer, const std::vector<int32_t>& prompt, int h,
                                                        const PrefixReservation& reservation, Clock::time_point deadline,
                                                        const std::function<bool()>& cancelled) {
  PrefillRequest req;
  req.transfer_id = next_transfer_.fetch_add(1);
  req.layout = layout_;
  req.tokens.assign(prompt.begin(), prompt.begin() + h * int(layout_.block_size) + 1);
  for (const PinnedBlock& b : reservation.receive) req.wanted.push_back({b.kind, uint32_t(b.index)});
  const std::string where = "prefill worker " + peer.host + ":" + peer.port;

  // Every failure path: nothing is in flight (read() guarantees it), so the blocks go back now;
  // the prefill worker is told to drop the transfer, briefly, whatever state it is in.
  auto fail = [&](const std::string& message) -> Status {
    std::vector<PinnedBlock> pins = reservation.held;
    pins.insert(pins.end(), reservation.receive.begin(), reservation.receive.end());
    unpin_later(engine_, std::move(pins));
    (void)pd_post(peer, "/internal/pd/v1/release", encode(Release{req.transfer_id, 0}),
                  std::min(Clock::now() + std::chrono::seconds(2), std::max(deadline, Clock::now() + std::chrono::milliseconds(500))));
    return Status::Error(where + ": " + message);
  };

  auto reply = pd_post(peer, "/internal/pd/v1/prefill", encode(req), deadline, cancelled);
  if (!reply.ok()) return fail(reply.status().message());
  if (reply->status != 200) {
    std::string body = reply->body.substr(0, 300);
    while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.pop_back();
    return fail("answered " + std::to_string(reply->status) + ": " + body);
  }
  auto grant = decode_prefill_grant(reply->body);
  if (!grant.ok()) return fail(grant.status().message());
  if (Status st = check_grant(*grant, req, layout_); !st.ok()) return fail(st.message());
  if (cancelled && cancelled()) return fail("the client went away");

  std::vector<BlockRead> reads;
  for (size_t i = 0; i < reservation.receive.size(); ++i)
    reads.push_back({reservation.receive[i].kind, grant->blocks[i], reservation.receive[i].block});
  const auto lease_end = Clock::now() + std::chrono::milliseconds(grant->lease_ms);
  if (Status st = agent_.read(grant->worker_address, grant->kinds, grant->layout, reads, std::min(deadline, lease_end)); !st.ok())
    return fail(st.message());

  auto ack_reply = pd_post(peer, "/internal/pd/v1/release", encode(Release{req.transfer_id, 1}), deadline);
  if (!ack_reply.ok()) return fail("release: " + ack_reply.status().message());
  if (ack_reply->status != 200) return fail("release answered " + std::to_string(ack_reply->status));
  auto ack = decode_release_ack(ack_reply->body);
  if (!ack.ok()) return fail(ack.status().message());
  if (ack->transfer_id != req.transfer_id || ack->lease_held != 1)
    return fail("the lease on the blocks ended before they were read; their bytes are not trusted");

  auto pins = call_on_engine<std::vector<PinnedBlock>>(
      engine_, [prompt, reservation](EngineCore& core) { return core.import_prefix(prompt, reservation); },
      [](EngineCore& core, std::vector<PinnedBlock>& pins) { core.unpin(pins); }, deadline);
  if (!pins) return Status::Error(where + ": the engine did not file the received blocks before the timeout");
  return std::move(*pins);
}

std::string DecodeWorker::metrics() const {
  std::lock_guard lock(mu_);
  std::string out;
  auto line = [&](const char* name, const char* type, const char* help, double value) {
    append_metric(out, name, type, help, "role=\"decode\"", value);
  };
  line("deepinfer_pd_transfers_total", "counter", "Requests whose prompt blocks came from a prefill worker", double(n_remote_));
  line("deepinfer_pd_transfer_failures_total", "counter", "Remote prefills that failed (answered 503)", double(n_failed_));
  line("deepinfer_pd_blocks_moved_total", "counter", "KV blocks received from prefill workers", double(n_blocks_));
  line("deepinfer_pd_bytes_moved_total", "counter", "KV bytes received from prefill workers", double(n_bytes_));
  line("deepinfer_pd_transfer_seconds_total", "counter", "Seconds spent in remote prefills", seconds_);
  line("deepinfer_pd_local_prefills_total", "counter", "Requests with a prefill URL computed here (short prompt or no free blocks)",
       double(n_local_));
  line("deepinfer_pd_local_hit_blocks_total", "counter", "Prompt blocks this prefix cache already held", double(n_hit_blocks_));
  const TransferTotals reads = agent_.totals();
  line("deepinfer_pd_read_seconds_total", "counter", "Seconds spent reading blocks over UCX (the data plane alone)", reads.seconds);
  line("deepinfer_pd_read_failures_total", "counter", "UCX reads that failed (peer gone, deadline)", double(reads.n_failed));
  line("deepinfer_pd_blocks_held", "gauge", "KV blocks pinned for transfers", double(engine_.stats().n_kv_blocks_pinned));
  return out;
}

}  // namespace deepinfer::pd
