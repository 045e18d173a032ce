// FP4 linear weights as DeepSeek-V4 ships its routed experts, shared by every model's binder:
//   `prefix`.weight I8 [n_out, n_in / 2]: e2m1 nibbles packed two per byte, element j of a row in
//                   the low nibble of byte j / 2 when j is even, in the high nibble when odd;
//   `prefix`.scale  F8_E8M0 [n_out, n_in / 32]: one UE8M0 byte per 32 inputs, none 0xff (NaN);
//   W[i, j] = E2M1[nibble] * 2^(scale[i, j / 32] - 127), E2M1 = 0, .5, 1, 1.5, 2, 3, 4, 6 and
//   their negatives for nibbles 8-15.
// The weight is bound packed, as mapped (LinearWeight F4_E2M1 with scale_e8m0): the kernels read
// 4.25 bits per weight.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "kernels/ops.h"
#include "model/safetensors.h"

namespace deepinfer {

constexpr int kFp4ScaleBlock = 32;  // inputs per FP4 scale

// Binds `packed` (the tensor `prefix`.weight, dtype I8) with its `prefix`.scale from `ckpt` as an
// F4_E2M1 weight of [n_out, n_in]. Errors name the file and the tensor: n_in not a multiple of
// 32, a shape other than the above, a missing or non-F8_E8M0 scale (`dir` names the checkpoint
// where a tensor is missing), a 0xff scale byte (with its place).
Result<LinearWeight> bind_fp4_weight(const Checkpoint& ckpt, const std::string& dir, const std::string& prefix,
                                     const TensorView& packed, int64_t n_out, int64_t n_in);

// The stored bytes of a bound F4_E2M1 weight: the packed nibbles and the scales.
inline size_t fp4_weight_bytes(const LinearWeight& w) {
  return weight_data_bytes(w) + weight_scale_bytes(w);
}

}  // namespace deepinfer
