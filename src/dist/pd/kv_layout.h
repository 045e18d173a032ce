// The KvLayout (pd_messages.h) of this process's engine: what a peer's cache must match for
// blocks to move between them byte for byte.
#pragma once

#include "dist/pd/pd_messages.h"
#include "engine/kv_cache.h"
#include "model/causal_lm.h"

namespace deepinfer::pd {

KvLayout kv_layout_of(const CausalLMInfo& model, const KvCacheInfo& cache);

// Bytes one block of `kind` holds over all its slabs.
inline uint64_t block_bytes(const KvLayout& layout, uint32_t kind) {
  return uint64_t(layout.kinds[kind].n_slabs) * layout.kinds[kind].bytes_per_block;
}

}  // namespace deepinfer::pd
