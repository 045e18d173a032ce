// Block-scaled weight formats of DeepSeek-V4 checkpoints (reused by V4.1):
//   FP8: e4m3 [out, in] with UE8M0 scales [ceil(out / 128), ceil(in / 128)]:
//        W[i, j] = e4m3(w[i, j]) * 2^(s[i / 128, j / 128] - 127)
//   FP4: e2m1 nibbles packed two per byte [out, in / 2] (element j in the low nibble when j is
//        even) with UE8M0 scales [out, in / 32]: W[i, j] = E2M1[nibble] * 2^(s[i, j / 32] - 127)
#pragma once

#include <cstdint>

namespace deepinfer {

constexpr int kFp4ScaleBlock = 32;  // inputs per FP4 scale

// UE8M0 bytes to f32 powers of two (the kernels' F8_E4M3 scale_inv).
void ue8m0_to_f32(const uint8_t* scales, int64_t n, float* out);

// Expands FP4 e2m1 weights to bf16 [n_out, n_in], exactly (every value is a small multiple of a
// power of two). n_in must be a multiple of 32.
void fp4_e2m1_to_bf16(const uint8_t* packed, const uint8_t* scales, int64_t n_out, int64_t n_in, uint16_t* out);

}  // namespace deepinfer
