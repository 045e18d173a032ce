// Small f32 vector helpers shared by the CPU kernels. Each has one fixed summation order
// (eight interleaved partial sums combined pairwise), whatever the caller's batch: this is
// what keeps results bitwise batch-invariant.
#pragma once

#include <cstdint>
#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/dtype.h"
#include "kernels/ops.h"

namespace deepinfer::cpu {

inline float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += a[i + k] * b[i + k];
  for (int k = 0; i < n; ++i, ++k) acc[k] += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

// Row `row` of W as f32: out[n_in]. fp8 and int8 rows are multiplied by their blocks' scale_inv.
inline void dequant_row(const LinearWeight& w, int64_t row, float* out) {
  const int64_t n = w.n_in;
  switch (w.dtype) {
    case DType::F32:
      std::memcpy(out, static_cast<const float*>(w.data) + row * n, size_t(n) * 4);
      break;
    case DType::BF16: {
      const uint16_t* src = static_cast<const uint16_t*>(w.data) + row * n;
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(src[i]);
      break;
    }
    case DType::F16: {
      const uint16_t* src = static_cast<const uint16_t*>(w.data) + row * n;
      for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(src[i]);
      break;
    }
    case DType::F8_E4M3:
    case DType::I8_SM: {
      const uint8_t* src = static_cast<const uint8_t*>(w.data) + row * n;
      const int64_t scale_cols = (n + w.block_cols - 1) / w.block_cols;
      const float* scales = w.scale_inv + (row / w.block_rows) * scale_cols;
      const bool fp8 = w.dtype == DType::F8_E4M3;
      for (int64_t b = 0; b < scale_cols; ++b) {
        const float s = scales[b];
        const int64_t end = std::min<int64_t>(n, (b + 1) * w.block_cols);
        for (int64_t i = b * w.block_cols; i < end; ++i) out[i] = (fp8 ? fp8_e4m3_to_f32(src[i]) : int8_sm_to_f32(src[i])) * s;
      }
      break;
    }
    default:
      DI_CHECK_MSG(false, "storage-only dtype in a GEMM (weight binders admit F32, F16, BF16, F8_E4M3; I8_SM from requantization)");
  }
}

}  // namespace deepinfer::cpu
