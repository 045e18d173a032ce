#include "model/deepseek_v4/block_scaled_weights.h"

#include <cmath>

#include "core/check.h"
#include "core/dtype.h"

namespace deepinfer {
namespace {

constexpr float kE2M1[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                             -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

}  // namespace

void ue8m0_to_f32(const uint8_t* scales, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = deepinfer::ue8m0_to_f32(scales[i]);
}

void fp4_e2m1_to_bf16(const uint8_t* packed, const uint8_t* scales, int64_t n_out, int64_t n_in, uint16_t* out) {
  DI_CHECK(n_in % kFp4ScaleBlock == 0);
  const int64_t n_scales = n_in / kFp4ScaleBlock;
  for (int64_t i = 0; i < n_out; ++i) {
    for (int64_t j = 0; j < n_in; ++j) {
      const uint8_t b = packed[i * (n_in / 2) + j / 2];
      const int nibble = (j % 2 == 0) ? (b & 15) : (b >> 4);
      const float v = kE2M1[nibble] * deepinfer::ue8m0_to_f32(scales[i * n_scales + j / kFp4ScaleBlock]);
      out[i * n_in + j] = f32_to_bf16(v);
    }
  }
}

}  // namespace deepinfer
