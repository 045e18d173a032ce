// Sink attention as three steps, each with a per-output order that no split changes:
//  1. scores [n_heads, n_keys] = q . keys^T by linear (the keys as an f32 weight of n_keys rows);
//  2. each head's scores become its weights (KernelTable::sink_softmax, the sink in the denominator);
//  3. out [n_heads, dim] = weights . keys by outer_block, 4 V::kW columns at a time: each output a
//     chain of FMAs over the keys in order.
// Steps 2 and 3 run on the OpenMP threads (heads, then column blocks) unless the call is already
// inside a parallel region (the models attend their rows in parallel); step 1 is linear's split.
#include "kernels/cpu/sink_attention.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/work_split.h"

namespace deepinfer::cpu {

void sink_attention(const SinkAttentionParams& p) {
  DI_CHECK(p.q != nullptr && p.keys != nullptr && p.sink != nullptr && p.out != nullptr);
  DI_CHECK_MSG(p.n_heads > 0 && p.dim > 0 && p.n_keys > 0, "sink attention needs heads, a dimension and a key");
  const int64_t H = p.n_heads, n = p.n_keys, d = p.dim;
  thread_local std::vector<float> weights_buf;  // [H, n]
  weights_buf.resize(size_t(H * n));
  float* const weights = weights_buf.data();
  const LinearWeight keys{DType::F32, p.keys, n, d, nullptr, 128, 128};
  linear({p.q, d, H, &keys, weights, n});
  const float* const* rows = strided_rows(weights, n, H);
  const KernelTable& k = kernels();
  constexpr int64_t kCols = 64;  // outer_block's column blocks start at multiples of 64
  const int64_t n_cb = (d + kCols - 1) / kCols;
  // Worth the threads' start-up (a few microseconds) from a few hundred thousand products on.
#pragma omp parallel if (!omp_in_parallel() && H * n * d >= (int64_t(1) << 18))
  {
#pragma omp for schedule(static)
    for (int64_t h = 0; h < H; ++h) k.sink_softmax(weights + h * n, n, p.sink[h], p.scale);
#pragma omp for schedule(static)
    for (int64_t b = 0; b < n_cb; ++b)
      k.outer_block(rows, H, n, keys, 0, b * kCols, std::min(d, (b + 1) * kCols), p.out + b * kCols, d);
  }
}

}  // namespace deepinfer::cpu
