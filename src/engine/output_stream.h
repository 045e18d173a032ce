// OutputStream: one request's channel from the engine thread to its client.
//
// The engine pushes one update per sample per step; updates of a sample that the client has
// not taken yet are merged, so a slow reader gets everything since its last read in one update.
// The stream ends when every sample has finished and every update was taken.
// Thread safety: push from the engine thread, read from any one thread.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>

#include "engine/request.h"

namespace deepinfer {

class OutputStream {
 public:
  explicit OutputStream(int n_samples) : n_samples_(n_samples) {}

  // Engine side.
  void push(RequestOutput update);

  // Client side. next() blocks until an update or the end (nullopt); try_next() does not block
  // (nullopt: nothing pending now; see done()).
  std::optional<RequestOutput> next();
  std::optional<RequestOutput> try_next();
  bool done() const;
  // Called on the engine thread after every push (e.g. to wake an event loop); set before the
  // request is submitted or while nothing can be pushed.
  void set_notify(std::function<void()> notify) { notify_ = std::move(notify); }

 private:
  std::optional<RequestOutput> pop_locked();

  const int n_samples_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> pending_;
  int n_finished_ = 0;
  std::function<void()> notify_;
};

}  // namespace deepinfer
