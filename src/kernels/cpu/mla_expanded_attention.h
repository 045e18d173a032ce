// CPU expanded MLA attention, the prefill formulation (see kernels/ops.h for the params' contract).
#pragma once

#include "kernels/ops.h"

namespace deepinfer::cpu {
void mla_expanded_attention(const MlaExpandedAttentionParams& p);
}  // namespace deepinfer::cpu
