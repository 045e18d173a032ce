// Sink attention as three steps, each with a per-output order that no split changes:
//  1. scores [n_heads, n_keys] = q . keys^T by linear (the keys as an f32 weight of n_keys rows);
//  2. each head's scores become its weights (KernelTable::sink_softmax, the sink in the denominator);
//  3. out [n_heads, dim] = weights . keys by outer_block, 4 V::kW columns at a time: each output a
//     chain of FMAs over the keys in order.
// Steps 2 and 3 run on the OpenMP threads (heads, then column blocks) unless the call is already
// inside a parallel region (the models attend their rows in parallel); step 1 is linear's split.
// bf16 dots round the keys once per call (or take them rounded: keys_bf16); where the level has
// a bf16 kernel (amx's tiles) it runs each head tile, on the threads as steps 2 and 3; elsewhere
// the three steps run on the rounded queries, keys and weights, whose products are exact in f32.
#include "kernels/cpu/sink_attention.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "core/aligned_vector.h"
#include "core/check.h"
#include "core/dtype.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/work_split.h"

namespace deepinfer::cpu {

namespace {

// Worth the threads' start-up (a few microseconds) from a few hundred thousand products on.
bool worth_threads(const SinkAttentionParams& p) {
  return !omp_in_parallel() && int64_t(p.n_heads) * p.n_keys * p.dim >= (int64_t(1) << 18);
}

// Steps 1-3 in f32 over keys [n_keys, dim]; with round_weights, each weight is rounded to bf16
// between steps 2 and 3.
void attend_f32(const SinkAttentionParams& p, const float* q, const float* keys_f32, bool round_weights) {
  const int64_t H = p.n_heads, n = p.n_keys, d = p.dim;
  thread_local std::vector<float> weights_buf;  // [H, n]
  weights_buf.resize(size_t(H * n));
  float* const weights = weights_buf.data();
  const LinearWeight keys{DType::F32, keys_f32, n, d, nullptr, 128, 128};
  linear({q, d, H, &keys, weights, n});
  const float* const* rows = strided_rows(weights, n, H);
  const KernelTable& k = kernels();
  constexpr int64_t kCols = 64;  // outer_block's column blocks start at multiples of 64
  const int64_t n_cb = (d + kCols - 1) / kCols;
#pragma omp parallel if (worth_threads(p))
  {
#pragma omp for schedule(static)
    for (int64_t h = 0; h < H; ++h) {
      k.sink_softmax(weights + h * n, n, p.sink[h], p.scale);
      if (round_weights)
        for (int64_t t = 0; t < n; ++t) weights[h * n + t] = bf16_to_f32(f32_to_bf16(weights[h * n + t]));
    }
#pragma omp for schedule(static)
    for (int64_t b = 0; b < n_cb; ++b)
      k.outer_block(rows, H, n, keys, 0, b * kCols, std::min(d, (b + 1) * kCols), p.out + b * kCols, d);
  }
}

// x [rows, dim] rounded to bf16 and widened back, into a per-thread buffer.
const float* rounded_f32(const float* x, int64_t rows, int64_t dim, std::vector<float>& buf) {
  buf.resize(size_t(rows * dim));
  for (int64_t i = 0; i < rows * dim; ++i) buf[size_t(i)] = bf16_to_f32(f32_to_bf16(x[i]));
  return buf.data();
}

}  // namespace

void sink_attention(const SinkAttentionParams& p) {
  DI_CHECK(p.q != nullptr && (p.keys != nullptr || p.keys_bf16 != nullptr) && p.sink != nullptr && p.out != nullptr);
  DI_CHECK_MSG(p.n_heads > 0 && p.dim > 0 && p.n_keys > 0, "sink attention needs heads, a dimension and a key");
  DI_CHECK_MSG(p.dot_dtype == DType::F32 || p.dot_dtype == DType::BF16, "sink attention dots are f32 or bf16");
  DI_CHECK_MSG(!p.keys_bf16 || (p.dot_dtype == DType::BF16 && p.keys_bf16_ld % 32 == 0 && p.keys_bf16_ld >= p.dim),
               "bf16 keys need bf16 dots and rows of whole chunks of 32");
  if (p.dot_dtype == DType::F32) return attend_f32(p, p.q, p.keys, false);
  const KernelTable& k = kernels();
  const int64_t n = p.n_keys, d = p.dim;
  if (k.sink_attend_bf16 == nullptr) {
    thread_local std::vector<float> q_buf, keys_buf;
    const float* q = rounded_f32(p.q, p.n_heads, p.dim, q_buf);
    if (!p.keys_bf16) return attend_f32(p, q, rounded_f32(p.keys, p.n_keys, p.dim, keys_buf), true);
    keys_buf.resize(size_t(n * d));
    for (int64_t t = 0; t < n; ++t)
      for (int64_t i = 0; i < d; ++i) keys_buf[size_t(t * d + i)] = bf16_to_f32(p.keys_bf16[t * p.keys_bf16_ld + i]);
    return attend_f32(p, q, keys_buf.data(), true);
  }
  const int n_ht = (p.n_heads + 15) / 16;
  const auto run = [&](const uint16_t* keys, int64_t ld) {
#pragma omp parallel for schedule(static) if (n_ht > 1 && worth_threads(p))
    for (int ht = 0; ht < n_ht; ++ht) k.sink_attend_bf16(p, keys, ld, ht * 16, std::min(p.n_heads, ht * 16 + 16));
  };
  if (p.keys_bf16) return run(p.keys_bf16, p.keys_bf16_ld);
  // Keys as the kernel reads them: [ceil(n / 16) * 16][ld] bf16, zero past n_keys and dim.
  const int64_t ld = (d + 31) / 32 * 32, n_pad = (n + 15) / 16 * 16;
  thread_local AlignedVector<uint16_t> keys_buf;
  keys_buf.resize(size_t(n_pad * ld));
  uint16_t* const keys = keys_buf.data();
  for (int64_t t = 0; t < n; ++t) {
    k.round_to_bf16(p.keys + t * d, keys + t * ld, d);
    std::fill(keys + t * ld + d, keys + (t + 1) * ld, uint16_t(0));
  }
  std::fill(keys + n * ld, keys + n_pad * ld, uint16_t(0));
  run(keys, ld);
}

}  // namespace deepinfer::cpu
