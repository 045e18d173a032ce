// RequestWorkers: a fixed set of threads that run request-preparation tasks (JSON parsing, chat
// rendering, tokenization) off the network threads, from a bounded queue.
//
// Thread-safe. try_post() refuses a task, running nothing, when `max_pending` tasks already wait
// or after stop(); stop() (and the destructor) runs every task already queued, then joins.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace deepinfer {

class RequestWorkers {
 public:
  RequestWorkers(int n_threads, int max_pending);
  ~RequestWorkers();
  RequestWorkers(const RequestWorkers&) = delete;
  RequestWorkers& operator=(const RequestWorkers&) = delete;

  bool try_post(std::function<void()> task);
  void stop();

 private:
  void run();

  const size_t max_pending_;
  std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace deepinfer
