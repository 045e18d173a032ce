// Engine: continuous batching over a paged latent KV cache, on its own thread.
//
//   auto engine = Engine::create(std::move(model), options);        // Result<unique_ptr<Engine>>
//   auto handle = (*engine)->submit({.prompt_token_ids = ids, .params = params});  // Result<RequestHandle>
//   while (auto update = handle->next()) { ... update->token_ids ... }   // streaming, or:
//   CompletedRequest done = handle->wait();
//   (*engine)->abort(handle->id());                                  // from any thread
//
// Threads: submit(), abort() and stats() may be called from any thread. The engine thread
// drains submitted requests and aborts before every step, so an abort takes effect (blocks
// freed, last update pushed with FinishReason::kAbort) within one step. Nothing throws across
// the loop. Destroying the engine finishes unfinished requests with FinishReason::kError.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "engine/engine_core.h"
#include "engine/step_group.h"

namespace deepinfer {

// A submitted request's id and output stream; copyable, usable from any one thread.
class RequestHandle {
 public:
  RequestHandle(uint64_t id, std::shared_ptr<OutputStream> stream) : id_(id), stream_(std::move(stream)) {}

  uint64_t id() const { return id_; }
  OutputStream& stream() { return *stream_; }
  // The next update (blocking); nullopt once every sample has finished.
  std::optional<RequestOutput> next() { return stream_->next(); }
  // Blocks until every sample has finished; everything they produced.
  CompletedRequest wait();

 private:
  uint64_t id_;
  std::shared_ptr<OutputStream> stream_;
};

class Engine {
 public:
  // Allocates the KV cache (reporting its size on stderr) and starts the engine thread. With a
  // StepGroup (expert parallelism; it outlives the engine), the thread steps in lockstep with the
  // group's other ranks (step_group.h), an idle rank polling the group every 1-5 milliseconds,
  // and destroying the engine waits until every rank stops; once the group fails, every request
  // here finishes with kError.
  static Result<std::unique_ptr<Engine>> create(std::unique_ptr<CausalLM> model, const EngineOptions& options,
                                                StepGroup* group = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates and enqueues a request; a Status names what is wrong with an invalid one.
  // `on_output`, if given, is called on the engine thread after every update pushed to the
  // request's stream (e.g. to wake an event loop); it must be cheap and must not block.
  Result<RequestHandle> submit(Request request, std::function<void()> on_output = {});
  // What submit() checks, without submitting (e.g. every rank of a group checks every prompt).
  Status validate(const Request& request) const { return core_->validate(request); }
  // As submit(), handing the request blocks pinned for it (EngineCore::add); if it is invalid the
  // pins are dropped on the engine thread.
  Result<RequestHandle> submit_pinned(Request request, std::vector<PinnedBlock> pinned, std::function<void()> on_output = {});
  void abort(uint64_t request_id);
  // Runs `task` on the engine thread before its next step (also when idle); for work on the
  // core's state (prefix_transfer.h). The task must be quick and must not block.
  void post(std::function<void(EngineCore&)> task);
  // As of the end of the last step.
  EngineStats stats() const;
  // Ok, or why the expert-parallel group failed (then requests fail; see create()).
  Status health() const { return group_ ? group_->health() : Status::Ok(); }

  const KvCacheInfo& kv_cache_info() const { return core_->kv_cache_info(); }
  const KvCacheView& kv_cache_view() const { return core_->kv_cache_view(); }
  const CausalLMInfo& model_info() const { return core_->model_info(); }
  int max_model_len() const { return core_->max_model_len(); }

 private:
  struct Submitted {
    uint64_t id;
    Request request;
    std::shared_ptr<OutputStream> stream;
    RequestTiming::Clock::time_point arrival;
    std::vector<PinnedBlock> pinned;
  };

  Engine(std::unique_ptr<CausalLM> model, std::unique_ptr<EngineCore> core, StepGroup* group);
  // Takes what other threads queued (posted tasks, submitted requests, aborts, in that order)
  // under `lock`, which it releases, and hands them to the core. Engine thread only.
  void apply_pending(std::unique_lock<std::mutex>& lock);
  void loop();
  void loop_in_group();

  std::unique_ptr<CausalLM> model_;
  std::unique_ptr<EngineCore> core_;
  StepGroup* group_;  // null: a process of its own

  mutable std::mutex mu_;  // guards everything below
  std::condition_variable wake_;
  std::vector<Submitted> inbox_;
  std::vector<uint64_t> aborts_;
  std::vector<std::function<void(EngineCore&)>> tasks_;
  EngineStats stats_;
  uint64_t next_id_ = 0;
  bool stopping_ = false;

  std::thread thread_;  // last: starts after everything above exists
};

}  // namespace deepinfer
