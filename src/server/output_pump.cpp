#include "server/output_pump.h"

#include <pthread.h>

#include <cstdio>

namespace deepinfer {

OutputPump::OutputPump(int n_threads) {
  for (int i = 0; i < std::max(1, n_threads); ++i)
    threads_.emplace_back([this] {
      pthread_setname_np(pthread_self(), "di-pump");  // for per-thread CPU accounting (bench/server)
      run();
    });
  reaper_ = std::thread([this] { reap_deadlines(); });
}

OutputPump::~OutputPump() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  reaper_cv_.notify_all();
  for (auto& t : threads_) t.join();
  reaper_.join();
}

void OutputPump::add(std::shared_ptr<GenerationJob> job) {
  {
    std::lock_guard lock(mu_);
    active_[job.get()] = job;
  }
  notify(job);
}

void OutputPump::notify(const std::shared_ptr<GenerationJob>& job) {
  if (job->queued.exchange(true)) return;  // already waiting for a pump
  {
    std::lock_guard lock(mu_);
    queue_.push_back(job);
  }
  cv_.notify_one();
}

size_t OutputPump::n_active() const {
  std::lock_guard lock(mu_);
  return active_.size();
}

void OutputPump::abort_all(const std::string& reason) {
  std::vector<std::shared_ptr<GenerationJob>> jobs;
  {
    std::lock_guard lock(mu_);
    for (auto& [ptr, job] : active_) jobs.push_back(job);
  }
  for (auto& job : jobs) {
    job->abort(reason);
    notify(job);
  }
}

void OutputPump::run() {
  for (;;) {
    std::shared_ptr<GenerationJob> job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    // Cleared before pumping: output that arrives during pump() queues it again.
    job->queued.store(false);
    bool done = false;
    try {
      done = job->pump();
    } catch (const std::exception& e) {  // a defect costs this request, never the process
      std::fprintf(stderr, "deepinfer: internal error producing a response: %s\n", e.what());
      job->fail_internal();
      done = true;
    }
    if (done) {
      std::lock_guard lock(mu_);
      active_.erase(job.get());
    }
  }
}

void OutputPump::reap_deadlines() {
  std::unique_lock lock(mu_);
  while (!reaper_cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return stopping_; })) {
    const auto now = GenerationJob::Clock::now();
    std::vector<std::shared_ptr<GenerationJob>> late, gone;
    for (auto& [ptr, job] : active_) {
      if (job->past_deadline(now)) late.push_back(job);
      else if (job->responder().disconnected()) gone.push_back(job);
    }
    lock.unlock();
    for (auto& job : late) {
      job->abort("the request timed out");
      notify(job);
    }
    for (auto& job : gone) notify(job);
    lock.lock();
  }
}

}  // namespace deepinfer
