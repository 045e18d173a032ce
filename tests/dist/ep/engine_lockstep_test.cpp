// The engine in an expert-parallel group (engine/step_group.h), on the engine tests' fake model
// with a scripted one-rank StepGroup standing in for the other ranks: idle steps run empty
// forwards while "other ranks" work, outputs are unchanged, shutdown waits for every rank, and a
// failed group (in the agreement or inside a forward's exchanges) fails requests cleanly.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "engine/engine.h"
#include "engine_test_util.h"
#include "fake_causal_lm.h"

namespace deepinfer::test {
namespace {

using namespace std::chrono_literals;

// Agreements of a group whose other ranks have work for the first `busy` agreements and stop
// `stop_lag` agreements after this rank does; agreement number `fail_at` fails the group.
class ScriptedStepGroup final : public StepGroup {
 public:
  Result<Agreement> agree(bool has_work, bool stopping) override {
    DI_RETURN_IF_ERROR(health());
    const int i = n_agreements++;
    if (i == fail_at) {
      fail(Status::Error("rank 1 stopped answering"));
      return health();
    }
    if (stopping) ++n_stopping;
    return Agreement{has_work || i < busy, stopping && n_stopping > stop_lag};
  }
  Status health() const override {
    std::lock_guard lock(mu_);
    return failure_;
  }
  void fail(Status why) {
    std::lock_guard lock(mu_);
    if (failure_.ok()) failure_ = std::move(why);
  }

  int busy = 0, stop_lag = 0, fail_at = -1;
  std::atomic<int> n_agreements{0}, n_stopping{0};

 private:
  mutable std::mutex mu_;
  Status failure_;
};

// The fake model, counting empty forwards; fails `group` inside its fail_at_forward-th forward
// (as a failed MoE exchange would).
class GroupedFakeModel final : public CausalLM {
 public:
  explicit GroupedFakeModel(ScriptedStepGroup& group) : group_(group) {}
  const CausalLMInfo& info() const override { return model_.info(); }
  Result<std::vector<KvKindSpec>> kv_kinds(DType dtype, int block_size) const override {
    return model_.kv_kinds(dtype, block_size);
  }
  void forward(const ForwardBatch& batch, const KvCacheView& kv, float* logits) override {
    if (batch.n_rows() == 0) ++n_empty_forwards;
    if (n_forwards++ == fail_at_forward) group_.fail(Status::Error("an expert exchange timed out"));
    model_.forward(batch, kv, logits);
  }

  int fail_at_forward = -1;
  std::atomic<int> n_forwards{0}, n_empty_forwards{0};

 private:
  ScriptedStepGroup& group_;
  FakeCausalLM model_;
};

EngineOptions options() {
  EngineOptions o;
  o.block_size = 16;
  o.max_num_batched_tokens = 48;
  o.kv_cache_memory_bytes = size_t(3000) * 2 * 24;
  return o;
}

struct Grouped {
  ScriptedStepGroup group;
  GroupedFakeModel* model = nullptr;
  std::unique_ptr<Engine> engine;

  void start(int fail_at_forward = -1) {
    auto m = std::make_unique<GroupedFakeModel>(group);
    m->fail_at_forward = fail_at_forward;
    model = m.get();
    auto e = Engine::create(std::move(m), options(), &group);
    ASSERT_TRUE(e.ok()) << e.status().message();
    engine = std::move(e).value();
  }
};

template <class Pred>
bool eventually(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(EngineInGroup, AnIdleRankRunsEmptyForwardsWhileOthersWork) {
  Grouped g;
  g.group.busy = 20;
  g.start();
  ASSERT_TRUE(eventually([&] { return g.group.n_agreements.load() > 25; }));
  EXPECT_EQ(g.model->n_empty_forwards.load(), 20);
  EXPECT_EQ(g.model->n_forwards.load(), 20);
  EXPECT_TRUE(g.engine->health().ok());
}

TEST(EngineInGroup, OutputsAreThoseOfAnEngineOfItsOwn) {
  Grouped g;
  g.group.busy = 40;  // the first requests share steps with other ranks' work
  g.start();
  const FakeCausalLM reference_model;
  const auto requests = varied_requests(12, 5, 96);
  std::vector<RequestHandle> handles;
  for (const Request& r : requests) {
    auto h = g.engine->submit(r);
    ASSERT_TRUE(h.ok()) << h.status().message();
    handles.push_back(std::move(h).value());
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    const CompletedRequest want = fake_reference(requests[i], reference_model);
    expect_same_outputs({want}, {handles[i].wait()}, "in a group");
  }
}

TEST(EngineInGroup, ShutdownWaitsUntilEveryRankStops) {
  Grouped g;
  g.group.stop_lag = 30;
  g.start();
  g.engine.reset();
  EXPECT_EQ(g.group.n_stopping.load(), 31);
}

Request long_request() {
  Request r;
  r.prompt_token_ids = {5, 6, 7};
  r.params.max_tokens = 2000;
  r.params.ignore_eos = true;
  return r;
}

TEST(EngineInGroup, AFailedAgreementFailsRequestsAndHealth) {
  Grouped g;
  g.group.fail_at = 30;
  g.start();
  auto h = g.engine->submit(long_request());
  ASSERT_TRUE(h.ok());
  const CompletedRequest done = h->wait();
  EXPECT_EQ(done.samples.at(0).finish_reason, FinishReason::kError);
  EXPECT_LT(done.samples[0].token_ids.size(), 2000u);
  ASSERT_FALSE(g.engine->health().ok());
  EXPECT_NE(g.engine->health().message().find("stopped answering"), std::string::npos);
  // Later requests fail at once; shutdown does not wait for the dead group.
  auto later = g.engine->submit(long_request());
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->wait().samples.at(0).finish_reason, FinishReason::kError);
  const int n_forwards = g.model->n_forwards.load();
  g.engine.reset();
  EXPECT_EQ(g.group.n_agreements.load(), 31);
  EXPECT_GE(n_forwards, 1);
}

TEST(EngineInGroup, AForwardWhoseExchangesFailedIsNotSampled) {
  Grouped g;
  g.start(/*fail_at_forward=*/3);
  Request r = long_request();
  r.params.max_tokens = 50;
  auto h = g.engine->submit(r);
  ASSERT_TRUE(h.ok());
  const CompletedRequest done = h->wait();
  EXPECT_EQ(done.samples.at(0).finish_reason, FinishReason::kError);
  // Forwards 0-2 sampled one token each (the prompt fits one step); forward 3's logits were dropped.
  EXPECT_EQ(done.samples[0].token_ids.size(), 3u);
  EXPECT_FALSE(g.engine->health().ok());
}

}  // namespace
}  // namespace deepinfer::test
