// CPU kernels for the paged MLA latent cache (see kernels/ops.h for the params' contracts).
#pragma once

#include "kernels/ops.h"

namespace deepinfer::cpu {
void mla_kv_store(const MlaKvStoreParams& p);
void mla_attention(const MlaAttentionParams& p);
}  // namespace deepinfer::cpu
