// CPU MoE layer (see kernels/ops.h, MoeParams).
#pragma once

#include "kernels/ops.h"

namespace deepinfer::cpu {
void moe(const MoeParams& p);
}  // namespace deepinfer::cpu
