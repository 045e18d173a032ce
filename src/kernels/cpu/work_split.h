// How the CPU drivers cut an output dimension into per-thread blocks. Only speed depends on
// these sizes: every kernel's per-element arithmetic is independent of the blocking.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace deepinfer::cpu {

// Output columns per block: a multiple of 4, small enough that the block's weight rows
// (row_bytes each) stay within l2_budget bytes of L2 while activation rows stream past, and that
// there are about 8 blocks per thread for balance.
inline int64_t column_block(int64_t n_out, int64_t row_bytes, int64_t l2_budget = 256 << 10) {
  const int64_t threads = omp_get_max_threads();
  const int64_t by_balance = (n_out + 8 * threads - 1) / (8 * threads);
  const int64_t by_cache = std::max<int64_t>(4, l2_budget / std::max<int64_t>(row_bytes, 1));
  const int64_t nb = std::min(by_balance, by_cache);
  return std::max<int64_t>(4, (nb + 3) / 4 * 4);
}

// Row pointers of a strided matrix, in a per-thread buffer reused across calls.
inline const float* const* strided_rows(const float* base, int64_t ld, int64_t m) {
  thread_local std::vector<const float*> rows;
  rows.resize(size_t(m));
  for (int64_t r = 0; r < m; ++r) rows[size_t(r)] = base + r * ld;
  return rows.data();
}

}  // namespace deepinfer::cpu
