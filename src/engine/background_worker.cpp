#include "engine/background_worker.h"

#include <utility>

#include "core/check.h"

namespace deepinfer {

BackgroundWorker::~BackgroundWorker() {
  if (in_flight_) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_; });
  }
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void BackgroundWorker::start(std::function<void()> task) {
  DI_CHECK(!in_flight_ && task);
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  {
    std::lock_guard<std::mutex> lock(mu_);
    task_ = std::move(task);
    done_ = false;
  }
  in_flight_ = true;
  cv_.notify_all();
}

void BackgroundWorker::wait() {
  if (!in_flight_) return;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done_; });
  in_flight_ = false;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void BackgroundWorker::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || task_; });
    if (stop_) return;
    std::function<void()> task = std::move(task_);
    task_ = nullptr;
    lock.unlock();
    std::exception_ptr error;
    try {
      task();
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    error_ = error;
    done_ = true;
    cv_.notify_all();
  }
}

}  // namespace deepinfer
