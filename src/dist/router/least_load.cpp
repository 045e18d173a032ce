#include "dist/router/least_load.h"

#include <algorithm>

namespace deepinfer::router {

double estimated_sequences(const DecodeCandidate& c) {
  const double since_poll = double(c.n_in_flight - c.n_in_flight_at_poll);
  return std::max(double(c.n_in_flight), c.polled.n_running + c.polled.n_waiting + since_poll);
}

std::optional<size_t> least_loaded(const std::vector<DecodeCandidate>& candidates, size_t start) {
  if (candidates.empty()) return std::nullopt;
  const size_t n = candidates.size();
  size_t best = start % n;
  for (size_t k = 1; k < n; ++k) {
    const size_t i = (start + k) % n;
    const double load = estimated_sequences(candidates[i]), best_load = estimated_sequences(candidates[best]);
    if (load < best_load || (load == best_load && candidates[i].polled.kv_usage < candidates[best].polled.kv_usage))
      best = i;
  }
  return best;
}

}  // namespace deepinfer::router
