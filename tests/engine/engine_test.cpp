// The threaded Engine: clients on many threads, aborts from any thread, shutdown, stats.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <thread>

#include "engine_test_util.h"

namespace deepinfer::test {
namespace {

EngineOptions options() {
  EngineOptions o;
  o.block_size = 16;
  o.max_num_batched_tokens = 48;
  o.kv_cache_memory_bytes = size_t(3000) * 2 * 24;
  return o;
}

std::unique_ptr<Engine> make_engine(const EngineOptions& o = options(), std::chrono::microseconds step = {}) {
  auto model = std::make_unique<FakeCausalLM>();
  model->forward_delay = step;
  auto engine = Engine::create(std::move(model), o);
  EXPECT_TRUE(engine.ok()) << engine.status().message();
  return std::move(engine).value();
}

Request long_request() {
  Request r;
  r.prompt_token_ids = {5, 6, 7};
  r.params.max_tokens = 2900;
  r.params.ignore_eos = true;
  return r;
}

TEST(Engine, ClientsOnManyThreadsGetTheReferenceOutputs) {
  auto engine = make_engine();
  const FakeCausalLM model;
  const auto requests = varied_requests(48, 3, 96);
  std::vector<CompletedRequest> results(requests.size());
  std::vector<std::thread> clients;
  for (size_t t = 0; t < 6; ++t) {
    clients.emplace_back([&, t] {
      for (size_t i = t; i < requests.size(); i += 6) {
        auto handle = engine->submit(requests[i]);
        ASSERT_TRUE(handle.ok()) << handle.status().message();
        results[i] = handle->wait();
      }
    });
  }
  for (auto& c : clients) c.join();
  std::vector<CompletedRequest> reference;
  for (const auto& r : requests) reference.push_back(fake_reference(r, model));
  expect_same_outputs(reference, results, "threaded clients");
  // Stats are published after each step, a moment after the step's outputs.
  EngineStats s = engine->stats();
  for (int i = 0; i < 1000 && s.n_running + s.n_waiting > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    s = engine->stats();
  }
  EXPECT_EQ(s.n_running + s.n_waiting, 0);
  EXPECT_GT(s.n_generated_tokens, 0u);
  EXPECT_GT(s.n_prefix_hit_tokens, 0u);
}

TEST(Engine, StreamsUpdatesWithTiming) {
  auto engine = make_engine();
  Request r;
  r.prompt_token_ids = {9, 8, 7, 6};
  r.params.temperature = 0;
  r.params.max_tokens = 5;
  r.params.logprobs = true;
  auto handle = engine->submit(r);
  ASSERT_TRUE(handle.ok());
  int n_tokens = 0;
  std::optional<RequestOutput> last;
  while (auto u = handle->next()) {
    EXPECT_EQ(u->token_ids.size(), u->logprobs.size());
    n_tokens += int(u->token_ids.size());
    last = std::move(u);
  }
  EXPECT_EQ(n_tokens, 5);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->finish_reason, FinishReason::kLength);
  EXPECT_EQ(last->n_prompt_tokens, 4);
  EXPECT_LE(last->timing.arrival, last->timing.first_scheduled);
  EXPECT_LE(last->timing.first_scheduled, last->timing.first_token);
  EXPECT_LE(last->timing.first_token, last->timing.finished);
  EXPECT_TRUE(handle->stream().done());
}

TEST(Engine, AbortFromAnotherThreadTakesEffectWithinAStep) {
  auto engine = make_engine(options(), std::chrono::milliseconds(5));
  auto handle = engine->submit(long_request());
  ASSERT_TRUE(handle.ok());
  int n_before = 0;
  while (n_before < 5) n_before += int(handle->next()->token_ids.size());
  // Tokens generated from the abort call on, counted by the engine itself, so that however long
  // this thread waits to be scheduled the bound stays the same: the step in flight, and one more
  // that the stats snapshot (taken after each step) may not show yet.
  uint64_t generated_at_abort = 0;
  std::thread([&] {
    generated_at_abort = engine->stats().n_generated_tokens;
    engine->abort(handle->id());
  }).join();
  FinishReason reason = FinishReason::kNone;
  while (auto u = handle->next()) reason = u->finish_reason;
  EXPECT_EQ(reason, FinishReason::kAbort);
  for (int i = 0; i < 10000 && engine->stats().n_kv_blocks_free != engine->stats().n_kv_blocks; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(engine->stats().n_kv_blocks_free, engine->stats().n_kv_blocks);
  EXPECT_LE(engine->stats().n_generated_tokens - generated_at_abort, 2u) << "at most the step in flight and one more";
  engine->abort(handle->id());  // finished by now: ignored
  engine->abort(12345);         // never existed: ignored
}

TEST(Engine, ShutdownEndsUnfinishedRequestsWithError) {
  auto engine = make_engine();
  auto running = engine->submit(long_request());
  ASSERT_TRUE(running.ok());
  ASSERT_TRUE(running->next().has_value());
  engine.reset();
  const CompletedRequest done = running->wait();
  ASSERT_EQ(done.samples.size(), 1u);
  EXPECT_EQ(done.samples[0].finish_reason, FinishReason::kError);
}

TEST(Engine, SubmitRejectsInvalidRequests) {
  auto engine = make_engine();
  Request r;
  auto handle = engine->submit(r);
  ASSERT_FALSE(handle.ok());
  EXPECT_NE(handle.status().message().find("empty"), std::string::npos);
  EXPECT_EQ(engine->max_model_len(), 2992);  // 187 whole blocks of 16 tokens fit
  EXPECT_EQ(engine->kv_cache_info().kinds[0].n_blocks, 187);
  EXPECT_EQ(engine->model_info().vocab_size, 96);
}

TEST(Engine, CreateReportsBadOptions) {
  EngineOptions o = options();
  o.kv_cache_memory_bytes = 100;
  auto engine = Engine::create(std::make_unique<FakeCausalLM>(), o);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.status().message().find("holds no block"), std::string::npos);
  o = options();
  o.max_num_seqs = 0;
  EXPECT_FALSE(Engine::create(std::make_unique<FakeCausalLM>(), o).ok());
}

}  // namespace
}  // namespace deepinfer::test
