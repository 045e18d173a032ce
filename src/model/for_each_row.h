// Per-row work of a forward pass on the OpenMP threads.
#pragma once

#include <cstdint>

namespace deepinfer {

// Runs row(i) for i in [0, n): rows on the OpenMP threads one at a time (schedule(dynamic, 1)) when
// there are several, a single row directly on the calling thread, so that the kernels it calls
// (sink attention, the indexer's scores) run their own parallel regions on the thread pool. An
// `omp parallel for if (n > 1)` would run a single row in an inactive region, which makes every
// region inside it nested: libgomp then starts new threads for each of those, with empty
// thread_local scratch, where it would wake its pool (measured: about 120 us per region against
// 1.5 us; on the V4.1 twin at batch 1 one per layer and step).
template <class Row>
void for_each_row(int64_t n, Row&& row) {
  if (n == 1) return row(int64_t(0));
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < n; ++i) row(i);
}

}  // namespace deepinfer
