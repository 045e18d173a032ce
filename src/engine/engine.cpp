#include "engine/engine.h"

#include <chrono>
#include <cstdio>

namespace deepinfer {

CompletedRequest RequestHandle::wait() {
  CompletedRequest done;
  done.request_id = id_;
  while (auto update = stream_->next()) {
    if (size_t(update->sample_index) >= done.samples.size()) done.samples.resize(size_t(update->sample_index) + 1);
    CompletedSample& s = done.samples[size_t(update->sample_index)];
    s.token_ids.insert(s.token_ids.end(), update->token_ids.begin(), update->token_ids.end());
    s.logprobs.insert(s.logprobs.end(), update->logprobs.begin(), update->logprobs.end());
    if (update->finished()) s.finish_reason = update->finish_reason;
    done.n_prompt_tokens = update->n_prompt_tokens;
    done.n_cached_tokens = update->n_cached_tokens;
    done.timing = update->timing;
  }
  return done;
}

Result<std::unique_ptr<Engine>> Engine::create(std::unique_ptr<CausalLM> model, const EngineOptions& options,
                                               StepGroup* group) {
  DI_ASSIGN_OR_RETURN(auto core, EngineCore::create(*model, options));
  std::fprintf(stderr, "%s; max model length %d\n", core->kv_cache_info().describe().c_str(), core->max_model_len());
  core->set_step_group(group);
  return std::unique_ptr<Engine>(new Engine(std::move(model), std::move(core), group));
}

Engine::Engine(std::unique_ptr<CausalLM> model, std::unique_ptr<EngineCore> core, StepGroup* group)
    : model_(std::move(model)),
      core_(std::move(core)),
      group_(group),
      stats_(core_->stats()),
      thread_([this] { group_ ? loop_in_group() : loop(); }) {}

Engine::~Engine() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

Result<RequestHandle> Engine::submit(Request request, std::function<void()> on_output) {
  DI_RETURN_IF_ERROR(core_->validate(request));
  auto stream = std::make_shared<OutputStream>(request.params.n);
  if (on_output) stream->set_notify(std::move(on_output));
  uint64_t id = 0;
  {
    std::lock_guard lock(mu_);
    id = next_id_++;
    inbox_.push_back({id, std::move(request), stream, RequestTiming::Clock::now(), {}});
  }
  wake_.notify_all();
  return RequestHandle(id, std::move(stream));
}

Result<RequestHandle> Engine::submit_pinned(Request request, std::vector<PinnedBlock> pinned,
                                            std::function<void()> on_output) {
  if (Status st = core_->validate(request); !st.ok()) {
    post([pinned = std::move(pinned)](EngineCore& core) { core.unpin(pinned); });
    return st;
  }
  auto stream = std::make_shared<OutputStream>(request.params.n);
  if (on_output) stream->set_notify(std::move(on_output));
  uint64_t id = 0;
  {
    std::lock_guard lock(mu_);
    id = next_id_++;
    inbox_.push_back({id, std::move(request), stream, RequestTiming::Clock::now(), std::move(pinned)});
  }
  wake_.notify_all();
  return RequestHandle(id, std::move(stream));
}

void Engine::post(std::function<void(EngineCore&)> task) {
  {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(task));
  }
  wake_.notify_all();
}

void Engine::abort(uint64_t request_id) {
  {
    std::lock_guard lock(mu_);
    aborts_.push_back(request_id);
  }
  wake_.notify_all();
}

EngineStats Engine::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void Engine::apply_pending(std::unique_lock<std::mutex>& lock) {
  std::vector<Submitted> inbox = std::move(inbox_);
  std::vector<uint64_t> aborts = std::move(aborts_);
  std::vector<std::function<void(EngineCore&)>> tasks = std::move(tasks_);
  inbox_.clear();
  aborts_.clear();
  tasks_.clear();
  lock.unlock();
  for (auto& task : tasks) task(*core_);
  for (Submitted& s : inbox) core_->add(s.id, std::move(s.request), std::move(s.stream), s.arrival, std::move(s.pinned));
  for (uint64_t id : aborts) core_->abort(id);
}

void Engine::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !inbox_.empty() || !aborts_.empty() || !tasks_.empty() || core_->has_work(); });
    const bool stopping = stopping_;
    apply_pending(lock);
    if (stopping) {
      core_->finish_all(FinishReason::kError);
      return;
    }
    if (core_->has_work()) core_->step();
    const EngineStats stats = core_->stats();
    lock.lock();
    stats_ = stats;
  }
}

void Engine::loop_in_group() {
  // Idle ranks agree every millisecond for a while after work, then every 5 (a request waits at
  // most that long for its first step; an idle group costs little CPU).
  constexpr auto kPollBusy = std::chrono::milliseconds(1), kPollIdle = std::chrono::milliseconds(5);
  constexpr auto kIdleAfter = std::chrono::milliseconds(200);
  auto last_work = std::chrono::steady_clock::now();
  bool failed = false;
  std::unique_lock lock(mu_);
  for (;;) {
    const bool stopping = stopping_;
    apply_pending(lock);
    if (stopping || failed) core_->finish_all(FinishReason::kError);
    bool any_work = false;
    if (failed) {
      if (stopping) return;
    } else if (Result<StepGroup::Agreement> a = group_->agree(core_->has_work(), stopping); !a.ok()) {
      std::fprintf(stderr, "deepinfer: expert-parallel group failed: %s\n", a.status().message().c_str());
      failed = true;
      core_->finish_all(FinishReason::kError);
    } else if (a->any_work) {
      any_work = true;
      last_work = std::chrono::steady_clock::now();
      if (core_->has_work()) core_->step();
      else core_->step_idle();
    } else if (a->all_stopping) {
      return;
    }
    const EngineStats stats = core_->stats();
    lock.lock();
    stats_ = stats;
    if (!any_work) {
      const auto woken = [&] { return (stopping_ && !stopping) || !inbox_.empty() || !aborts_.empty() || !tasks_.empty(); };
      if (failed) wake_.wait(lock, [&] { return stopping_ || woken(); });
      else wake_.wait_for(lock, std::chrono::steady_clock::now() - last_work < kIdleAfter ? kPollBusy : kPollIdle, woken);
    }
  }
}

}  // namespace deepinfer
