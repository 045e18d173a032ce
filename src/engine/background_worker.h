// BackgroundWorker: one long-lived thread that runs one task at a time for its owner, so that a
// per-step overlap (the engine's grammar-mask prefetch) does not start a thread every step.
// start() hands it a task (the previous one must have been waited for); wait() blocks until the
// task has run, and rethrows what the task threw. The owner's thread alone calls start() and wait(); the destructor waits for a
// task in flight, then stops the thread.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace deepinfer {

class BackgroundWorker {
 public:
  BackgroundWorker() = default;
  ~BackgroundWorker();
  BackgroundWorker(const BackgroundWorker&) = delete;
  BackgroundWorker& operator=(const BackgroundWorker&) = delete;

  // Runs `task` on the worker thread (started on first use). No task may be in flight.
  void start(std::function<void()> task);
  // Returns once the task given to start() has finished (rethrowing its exception); at once when
  // none is in flight.
  void wait();
  bool busy() const { return in_flight_; }

 private:
  void loop();

  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> task_;  // guarded by mu_; empty once taken
  bool done_ = true;            // guarded by mu_: the last task has finished
  std::exception_ptr error_;    // guarded by mu_: what the last task threw
  bool stop_ = false;           // guarded by mu_
  bool in_flight_ = false;      // owner thread only: start() called, wait() not yet
};

}  // namespace deepinfer
