#include "dist/pd/prefill_worker.h"

#include <cstdio>

#include "dist/pd/engine_call.h"
#include "dist/pd/kv_layout.h"
#include "server/metrics.h"

namespace deepinfer::pd {

namespace {

using Clock = std::chrono::steady_clock;

Clock::duration seconds(double s) { return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); }

void send_text(const std::shared_ptr<HttpResponder>& res, int status, const std::string& message) {
  res->send(status, "text/plain; charset=utf-8", message + "\n");
}

constexpr int kPinAttempts = 3;  // a computed prefix evicted before it was pinned is computed again

}  // namespace

PrefillWorker::PrefillWorker(Engine& engine, KvTransferAgent& agent, PdOptions options)
    : engine_(engine),
      agent_(agent),
      options_(options),
      layout_(kv_layout_of(engine.model_info(), engine.kv_cache_info())),
      reaper_([this] { reap_loop(); }) {}

PrefillWorker::~PrefillWorker() {
  std::vector<PinnedBlock> pins;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (auto& [id, t] : transfers_) {
      if (t->state == State::kLeased) pins.insert(pins.end(), t->pins.begin(), t->pins.end());
      t->state = State::kDropped;
    }
    transfers_.clear();
  }
  cv_.notify_all();
  wake_->notify_all();
  reaper_.join();
  if (!pins.empty()) engine_.post([pins](EngineCore& core) { core.unpin(pins); });
  // A pin task of a prefill that gave up waiting may still be queued, and it uses this object:
  // the engine runs its tasks in order, so once this one ran, none of them is left.
  call_on_engine<bool>(
      engine_, [](EngineCore&) { return true; }, [](EngineCore&, bool&) {},
      std::chrono::steady_clock::now() + std::chrono::seconds(30));
}

void PrefillWorker::handle(const HttpRequest& request, const std::shared_ptr<HttpResponder>& res, const std::string& path) {
  if (request.method != "POST") return send_text(res, 405, "use POST for " + path);
  if (path == "/internal/pd/v1/prefill") return prefill(request, res);
  if (path == "/internal/pd/v1/release") return release(request, res);
  send_text(res, 404, "no route for " + path);
}

void PrefillWorker::count_failure() {
  std::lock_guard lock(mu_);
  ++n_failed_;
}

void PrefillWorker::prefill(const HttpRequest& request, const std::shared_ptr<HttpResponder>& res) {
  const auto start = Clock::now();
  const auto deadline = start + seconds(options_.timeout_seconds);
  auto m = decode_prefill_request(request.body);
  if (!m.ok()) {
    count_failure();
    return send_text(res, 400, m.status().message());
  }
  if (Status st = check_request(*m, layout_); !st.ok()) {
    count_failure();
    return send_text(res, st.message().starts_with("KV layout mismatch") ? 409 : 400, st.message());
  }
  auto t = std::make_shared<Transfer>();
  t->start = start;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return send_text(res, 503, "the worker is shutting down");
    if (!transfers_.emplace(m->transfer_id, t).second) {
      ++n_failed_;
      return send_text(res, 409, "transfer " + std::to_string(m->transfer_id) + " is already under way");
    }
  }
  auto outcome = compute_and_pin(m->transfer_id, t, *m, deadline);
  if (auto* error = std::get_if<std::pair<int, std::string>>(&outcome)) {
    {
      std::lock_guard lock(mu_);
      ++n_failed_;
      auto it = transfers_.find(m->transfer_id);
      if (it != transfers_.end() && it->second == t) transfers_.erase(it);
    }
    return send_text(res, error->first, error->second);
  }
  const auto& pins = std::get<std::vector<PinnedBlock>>(outcome);
  PrefillGrant g;
  g.transfer_id = m->transfer_id;
  g.lease_ms = uint32_t(options_.lease_seconds * 1000);
  g.layout = layout_;
  g.worker_address = agent_.worker_address();
  g.kinds = agent_.remote_kinds();
  for (const PinnedBlock& p : pins) g.blocks.push_back(p.block);
  {
    std::lock_guard lock(mu_);
    ++n_granted_;
  }
  res->send(200, std::string(kContentType), encode(g));
}

std::variant<std::vector<PinnedBlock>, std::pair<int, std::string>> PrefillWorker::compute_and_pin(
    uint64_t id, const std::shared_ptr<Transfer>& t, const PrefillRequest& m, Clock::time_point deadline) {
  std::vector<PinnedBlock> slots;
  for (const BlockWant& w : m.wanted) slots.push_back({w.kind, int32_t(w.index), -1});
  for (int attempt = 0; attempt < kPinAttempts; ++attempt) {
    Request r;
    r.prompt_token_ids = m.tokens;
    r.params.temperature = 0;
    r.params.max_tokens = 1;
    r.params.ignore_eos = true;
    auto handle = engine_.submit(std::move(r), [wake = wake_] { wake->notify_all(); });
    if (!handle.ok()) return std::pair{400, "the prompt: " + handle.status().message()};
    {
      std::unique_lock lock(mu_);
      if (t->state == State::kDropped) {
        engine_.abort(handle->id());
        return std::pair{409, "transfer " + std::to_string(id) + " was dropped"};
      }
      t->engine_request = handle->id();
      for (;;) {
        while (handle->stream().try_next()) {
        }
        if (handle->stream().done()) break;
        if (t->state == State::kDropped || Clock::now() >= deadline) {
          engine_.abort(handle->id());
          return t->state == State::kDropped ? std::pair{409, "transfer " + std::to_string(id) + " was dropped"}
                                             : std::pair{504, std::string("the prefill passed its timeout")};
        }
        wake_->wait_for(lock, std::chrono::milliseconds(20));
      }
      t->engine_request.reset();
    }
    // Pin on the engine thread; a transfer dropped meanwhile gets its pins back at once.
    using Pins = std::optional<std::vector<PinnedBlock>>;
    const std::vector<int32_t>& tokens = m.tokens;
    auto pinned = call_on_engine<Pins>(
        engine_,
        [this, t, tokens, slots](EngineCore& core) -> Pins {
          Pins pins = core.pin_prefix(tokens, slots);
          if (!pins) return pins;
          std::lock_guard lock(mu_);
          if (t->state == State::kDropped) {
            core.unpin(*pins);
            return std::nullopt;
          }
          t->state = State::kLeased;
          t->pins = *pins;
          t->lease_end = Clock::now() + seconds(options_.lease_seconds);
          for (const PinnedBlock& p : *pins) t->n_bytes += block_bytes(layout_, p.kind);
          return pins;
        },
        [this, t](EngineCore& core, Pins& pins) {
          // Nobody waits for this grant: unpin unless a lease was recorded (the reaper owns it then).
          if (!pins) return;
          std::lock_guard lock(mu_);
          if (t->state == State::kLeased) {
            t->state = State::kDropped;
            t->pins.clear();
            core.unpin(*pins);
          }
        },
        deadline);
    if (!pinned) return std::pair{504, std::string("the prefill passed its timeout")};
    if (*pinned) return std::move(**pinned);
    std::lock_guard lock(mu_);
    if (t->state == State::kDropped) return std::pair{409, "transfer " + std::to_string(id) + " was dropped"};
  }
  return std::pair{503, std::string("the computed blocks were evicted before they could be pinned; retry")};
}

void PrefillWorker::release(const HttpRequest& request, const std::shared_ptr<HttpResponder>& res) {
  auto m = decode_release(request.body);
  if (!m.ok()) return send_text(res, 400, m.status().message());
  ReleaseAck ack{m->transfer_id, 0};
  std::vector<PinnedBlock> pins;
  {
    std::lock_guard lock(mu_);
    auto it = transfers_.find(m->transfer_id);
    if (it != transfers_.end()) {
      Transfer& t = *it->second;
      const auto now = Clock::now();
      if (t.state == State::kLeased) {
        ack.lease_held = now <= t.lease_end ? 1 : 0;
        pins = std::move(t.pins);
        if (m->completed && ack.lease_held) {
          ++n_released_;
          n_blocks_ += pins.size();
          n_bytes_ += t.n_bytes;
        } else {
          ++n_failed_;
        }
        seconds_ += std::chrono::duration<double>(now - t.start).count();
      } else if (t.state == State::kComputing) {
        if (t.engine_request) engine_.abort(*t.engine_request);
      }
      t.state = State::kDropped;
      transfers_.erase(it);
    }
  }
  wake_->notify_all();
  if (!pins.empty()) engine_.post([pins](EngineCore& core) { core.unpin(pins); });
  res->send(200, std::string(kContentType), encode(ack));
}

void PrefillWorker::reap_loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(100));
    const auto now = Clock::now();
    std::vector<PinnedBlock> pins;
    for (auto it = transfers_.begin(); it != transfers_.end();) {
      Transfer& t = *it->second;
      if (t.state == State::kLeased && now > t.lease_end) {
        pins.insert(pins.end(), t.pins.begin(), t.pins.end());
        t.pins.clear();
        t.state = State::kDropped;
        ++n_expired_;
        ++n_failed_;
        it = transfers_.erase(it);
      } else {
        ++it;
      }
    }
    if (!pins.empty()) engine_.post([pins](EngineCore& core) { core.unpin(pins); });
  }
}

std::string PrefillWorker::metrics() const {
  std::lock_guard lock(mu_);
  std::string out;
  auto line = [&](const char* name, const char* type, const char* help, double value) {
    append_metric(out, name, type, help, "role=\"prefill\"", value);
  };
  line("deepinfer_pd_transfers_total", "counter", "Transfers whose blocks a decode worker read and released", double(n_released_));
  line("deepinfer_pd_transfer_failures_total", "counter", "Transfers that failed, were dropped or expired", double(n_failed_));
  line("deepinfer_pd_blocks_moved_total", "counter", "KV blocks read by decode workers", double(n_blocks_));
  line("deepinfer_pd_bytes_moved_total", "counter", "KV bytes read by decode workers", double(n_bytes_));
  line("deepinfer_pd_transfer_seconds_total", "counter", "Seconds from prefill request to release", seconds_);
  line("deepinfer_pd_grants_total", "counter", "Prefill requests answered with pinned blocks", double(n_granted_));
  line("deepinfer_pd_leases_expired_total", "counter", "Grants never released within their lease", double(n_expired_));
  line("deepinfer_pd_blocks_held", "gauge", "KV blocks pinned for transfers", double(engine_.stats().n_kv_blocks_pinned));
  return out;
}

}  // namespace deepinfer::pd
