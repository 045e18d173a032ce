// The polling wait that `serve` and `router` drain with on SIGTERM / SIGINT.
#pragma once

#include <chrono>
#include <thread>

namespace deepinfer {

// Checks busy() every 20 ms until it answers false or `until` has passed; returns its last answer
// (true: still busy at the deadline).
template <class Busy>
bool wait_while(Busy&& busy, std::chrono::steady_clock::time_point until) {
  while (busy() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return busy();
}

}  // namespace deepinfer
