// OutputPump: the threads that turn engine output into HTTP bytes. The engine thread only calls
// notify(job) (cheap: a queue push); pump threads run GenerationJob::pump(). It also owns the
// active jobs, aborts those past their deadline, and counts them for admission control. A pump()
// that throws (a defect) fails only its own job (GenerationJob::fail_internal), never the thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "server/generation_job.h"

namespace deepinfer {

class OutputPump {
 public:
  explicit OutputPump(int n_threads);
  ~OutputPump();  // aborts nothing: stop the engine first, or drain

  // Takes ownership until the job completes, and pumps it once.
  void add(std::shared_ptr<GenerationJob> job);
  // Schedules a pump of the job (from any thread, e.g. the engine's output callback).
  void notify(const std::shared_ptr<GenerationJob>& job);
  size_t n_active() const;
  // Aborts every active job with `reason` (shutdown past its grace period).
  void abort_all(const std::string& reason);

 private:
  void run();
  void reap_deadlines();

  mutable std::mutex mu_;
  std::condition_variable cv_;         // pump threads wait here for queued jobs
  std::condition_variable reaper_cv_;  // the deadline reaper sleeps here between rounds
  std::deque<std::shared_ptr<GenerationJob>> queue_;
  std::unordered_map<GenerationJob*, std::shared_ptr<GenerationJob>> active_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
  std::thread reaper_;
};

}  // namespace deepinfer
