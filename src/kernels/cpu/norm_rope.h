// CPU elementwise and normalization kernels (see kernels/ops.h for the params' contracts).
#pragma once

#include "kernels/ops.h"

namespace deepinfer::cpu {
void rms_norm(const RmsNormParams& p);
void rope(const RopeParams& p);
}  // namespace deepinfer::cpu
