// PrefillWorker over an Engine on the fake model: the lease that guards the prefill side of a
// transfer (released in time: acked as held; past its end: unpinned by the reaper and acked as not
// held, so decode discards the bytes), dropping a transfer while it computes, and the answers to
// malformed, mismatched and duplicate requests. Pins are back to zero after each.
#include "dist/pd/prefill_worker.h"

#include <gtest/gtest.h>

#include <thread>

#include "dist/pd/kv_layout.h"
#include "fake_causal_lm.h"

namespace deepinfer::pd {
namespace {

using namespace std::chrono_literals;

class CapturingResponder final : public HttpResponder {
 public:
  void send(int s, const std::string&, std::string b, HttpHeaders) override {
    status = s;
    body = std::move(b);
  }
  void begin_stream(int, const std::string&, HttpHeaders) override { FAIL() << "control routes do not stream"; }
  void write(std::string) override {}
  void end() override {}
  bool disconnected() const override { return false; }
  void on_disconnect(std::function<void()>) override {}
  int status = 0;
  std::string body;
};

struct Fixture {
  Fixture(double lease_seconds, std::chrono::microseconds forward_delay = 0us) {
    auto model = std::make_unique<test::FakeCausalLM>(96, 2, std::vector<int32_t>{1}, 6);
    model->forward_delay = forward_delay;
    EngineOptions o;
    o.block_size = 4;
    o.max_num_batched_tokens = 8;
    o.kv_cache_memory_bytes = size_t(512) * 2 * 24 * 2;
    engine = std::move(Engine::create(std::move(model), o)).value();
    auto a = KvTransferAgent::create(engine->kv_cache_view());
    EXPECT_TRUE(a.ok()) << a.status().message();
    agent = std::move(a).value();
    worker = std::make_unique<PrefillWorker>(*engine, *agent, PdOptions{1, 30, lease_seconds});
    layout = kv_layout_of(engine->model_info(), engine->kv_cache_info());
  }

  std::shared_ptr<CapturingResponder> post(const std::string& path, std::string body) {
    auto res = std::make_shared<CapturingResponder>();
    worker->handle(HttpRequest{"POST", path, {}, std::move(body)}, res, path);
    return res;
  }

  PrefillRequest request(uint64_t id, int n_blocks) const {
    PrefillRequest m;
    m.transfer_id = id;
    m.layout = layout;
    for (int i = 0; i < n_blocks * 4 + 1; ++i) m.tokens.push_back(2 + (i * 5 + int(id)) % 90);
    for (uint32_t i = 0; i < uint32_t(n_blocks); ++i) m.wanted.push_back({0, i});
    m.wanted.push_back({1, uint32_t(n_blocks - 1)});  // the window kind: only its last blocks
    return m;
  }

  int pinned() const { return engine->stats().n_kv_blocks_pinned; }

  // Engine::stats() is a snapshot taken after each pass of the engine loop: poll it.
  void wait_pinned(int n) const {
    for (auto end = std::chrono::steady_clock::now() + 30s; pinned() != n;) {
      ASSERT_LT(std::chrono::steady_clock::now(), end) << pinned() << " blocks pinned, not " << n;
      std::this_thread::sleep_for(1ms);
    }
  }
  void wait_unpinned() const { wait_pinned(0); }

  std::unique_ptr<Engine> engine;
  std::unique_ptr<KvTransferAgent> agent;
  std::unique_ptr<PrefillWorker> worker;
  KvLayout layout;
};

TEST(PrefillWorker, AReleaseWithinTheLeaseIsAckedAsHeld) {
  Fixture f(30);
  const PrefillRequest m = f.request(11, 5);
  auto res = f.post("/internal/pd/v1/prefill", encode(m));
  ASSERT_EQ(res->status, 200) << res->body;
  auto grant = decode_prefill_grant(res->body);
  ASSERT_TRUE(grant.ok()) << grant.status().message();
  EXPECT_TRUE(check_grant(*grant, m, f.layout).ok());
  EXPECT_EQ(grant->worker_address, f.agent->worker_address());
  f.wait_pinned(int(m.wanted.size()));
  auto ack = f.post("/internal/pd/v1/release", encode(Release{11, 1}));
  ASSERT_EQ(ack->status, 200);
  EXPECT_EQ(*decode_release_ack(ack->body), (ReleaseAck{11, 1}));
  f.wait_unpinned();
  // A second release of the same transfer finds nothing held.
  EXPECT_EQ(*decode_release_ack(f.post("/internal/pd/v1/release", encode(Release{11, 1}))->body), (ReleaseAck{11, 0}));
  EXPECT_NE(f.worker->metrics().find("deepinfer_pd_transfers_total{role=\"prefill\"} 1\n"), std::string::npos);
}

TEST(PrefillWorker, AnExpiredLeaseIsUnpinnedAndAckedAsNotHeld) {
  Fixture f(0.2);
  auto res = f.post("/internal/pd/v1/prefill", encode(f.request(12, 3)));
  ASSERT_EQ(res->status, 200) << res->body;
  const std::string expired = "deepinfer_pd_leases_expired_total{role=\"prefill\"} 1\n";
  for (auto end = std::chrono::steady_clock::now() + 30s; f.worker->metrics().find(expired) == std::string::npos;) {
    ASSERT_LT(std::chrono::steady_clock::now(), end) << "the lease never expired";
    std::this_thread::sleep_for(5ms);
  }
  f.wait_unpinned();  // by the reaper, not a release
  auto ack = f.post("/internal/pd/v1/release", encode(Release{12, 1}));
  EXPECT_EQ(*decode_release_ack(ack->body), (ReleaseAck{12, 0})) << "decode must not trust the bytes";
}

TEST(PrefillWorker, ATransferDroppedWhileComputingPinsNothing) {
  Fixture f(30, 100ms);  // every step 100 ms: the 41-token prompt takes 6
  std::shared_ptr<CapturingResponder> res;
  std::thread prefill([&] { res = f.post("/internal/pd/v1/prefill", encode(f.request(13, 10))); });
  for (auto end = std::chrono::steady_clock::now() + 30s; f.engine->stats().n_running == 0;) {
    ASSERT_LT(std::chrono::steady_clock::now(), end);
    std::this_thread::sleep_for(1ms);
  }
  auto ack = f.post("/internal/pd/v1/release", encode(Release{13, 0}));
  prefill.join();
  EXPECT_EQ(*decode_release_ack(ack->body), (ReleaseAck{13, 0}));
  EXPECT_EQ(res->status, 409) << res->body;
  f.wait_unpinned();
}

TEST(PrefillWorker, RefusesMalformedMismatchedAndDuplicateRequests) {
  Fixture f(30);
  EXPECT_EQ(f.post("/internal/pd/v1/prefill", "DIPD")->status, 400);
  std::string truncated = encode(f.request(1, 2));
  truncated.pop_back();
  EXPECT_EQ(f.post("/internal/pd/v1/prefill", truncated)->status, 400);
  EXPECT_EQ(f.post("/internal/pd/v1/release", "garbage")->status, 400);
  PrefillRequest other = f.request(2, 2);
  other.layout.dtype ^= 1;
  auto res = f.post("/internal/pd/v1/prefill", encode(other));
  EXPECT_EQ(res->status, 409);
  EXPECT_NE(res->body.find("cache dtype"), std::string::npos) << res->body;
  PrefillRequest out_of_range = f.request(3, 2);
  out_of_range.wanted.push_back({0, 2});
  EXPECT_EQ(f.post("/internal/pd/v1/prefill", encode(out_of_range))->status, 400);
  PrefillRequest bad_token = f.request(4, 2);
  bad_token.tokens[3] = 96;  // the fake model's vocabulary is [0, 96)
  EXPECT_EQ(f.post("/internal/pd/v1/prefill", encode(bad_token))->status, 400);
  ASSERT_EQ(f.post("/internal/pd/v1/prefill", encode(f.request(5, 2)))->status, 200);
  EXPECT_EQ(f.post("/internal/pd/v1/prefill", encode(f.request(5, 2)))->status, 409);
  EXPECT_EQ(f.post("/internal/pd/v1/nothing", "x")->status, 404);
  f.post("/internal/pd/v1/release", encode(Release{5, 0}));
  f.wait_unpinned();
}

}  // namespace
}  // namespace deepinfer::pd
