// The decode worker choice: least load first. A worker's load is its sequences (running +
// waiting) as last read from its /metrics, corrected by the requests the router itself has
// started or finished there since that read, so that a burst spreads before the next poll;
// never less than the router's own requests in flight there. Ties go to the lower KV-cache
// usage, then round-robin from `start` (so that idle workers take turns).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "dist/router/worker_load.h"

namespace deepinfer::router {

struct DecodeCandidate {
  WorkerLoad polled;                // as last read from /metrics
  int64_t n_in_flight = 0;          // the router's requests there now
  int64_t n_in_flight_at_poll = 0;  // ... when `polled` was read
};

// Estimated sequences on the worker now.
double estimated_sequences(const DecodeCandidate& c);

// The position in `candidates` of the one to use; nullopt when empty.
std::optional<size_t> least_loaded(const std::vector<DecodeCandidate>& candidates, size_t start = 0);

}  // namespace deepinfer::router
