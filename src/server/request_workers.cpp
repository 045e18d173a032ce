#include "server/request_workers.h"

#include <pthread.h>

#include <algorithm>

namespace deepinfer {

RequestWorkers::RequestWorkers(int n_threads, int max_pending) : max_pending_(size_t(std::max(1, max_pending))) {
  for (int i = 0; i < std::max(1, n_threads); ++i)
    threads_.emplace_back([this] {
      pthread_setname_np(pthread_self(), "di-request");
      run();
    });
}

RequestWorkers::~RequestWorkers() { stop(); }

void RequestWorkers::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

bool RequestWorkers::try_post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || tasks_.size() >= max_pending_) return false;
    tasks_.push_back(std::move(task));
  }
  ready_.notify_one();
  return true;
}

void RequestWorkers::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, nothing left
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace deepinfer
