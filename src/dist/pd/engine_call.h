// call_on_engine: runs a function on the engine thread (Engine::post) and waits for its result
// until a deadline, so a request thread never waits unboundedly on the engine. If the wait gives
// up first, the result, when it comes, goes to `discard` on the engine thread instead: blocks
// pinned by a call nobody waits for any more are released there, never lost.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "engine/engine.h"

namespace deepinfer::pd {

template <typename T>
std::optional<T> call_on_engine(Engine& engine, std::function<T(EngineCore&)> fn,
                                std::function<void(EngineCore&, T&)> discard,
                                std::chrono::steady_clock::time_point deadline) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<T> value;
    bool abandoned = false;
  };
  auto shared = std::make_shared<Shared>();
  engine.post([shared, fn = std::move(fn), discard = std::move(discard)](EngineCore& core) {
    T value = fn(core);
    std::lock_guard lock(shared->mu);
    if (shared->abandoned) {
      discard(core, value);
      return;
    }
    shared->value = std::move(value);
    shared->cv.notify_all();
  });
  std::unique_lock lock(shared->mu);
  if (!shared->cv.wait_until(lock, deadline, [&] { return shared->value.has_value(); })) {
    shared->abandoned = true;
    return std::nullopt;
  }
  return std::move(shared->value);
}

}  // namespace deepinfer::pd
