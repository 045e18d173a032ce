// EngineOptions: the engine's knobs, with serving defaults. The CLI and server map their flags
// (--block-size, --max-num-batched-tokens, --max-num-seqs, --kv-cache-memory,
// --kv-cache-memory-fraction, --kv-cache-dtype, --no-prefix-caching, --max-model-len, --seed)
// onto these fields.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace deepinfer {

struct EngineOptions {
  int block_size = 64;                     // tokens per KV block
  int max_num_batched_tokens = 2048;       // tokens per step: prefill chunks and decodes together
  int max_num_seqs = 256;                  // sequences running at once
  size_t kv_cache_memory_bytes = 0;        // KV cache budget; 0: use kv_cache_memory_fraction
  double kv_cache_memory_fraction = 0.5;   // of the memory available (MemAvailable) at start
  DType kv_cache_dtype = DType::BF16;      // BF16, F8_E4M3 (latent e4m3 + per-128 scales, rope bf16) or F32
  bool enable_prefix_caching = true;
  int max_model_len = 0;                   // prompt + output tokens per sequence; 0: the model's limit
  uint64_t seed = 0;                       // requests without a seed derive theirs from it

  Status validate() const;
  // The KV cache budget in bytes: kv_cache_memory_bytes, or the fraction of available memory.
  Result<size_t> kv_cache_budget() const;
};

}  // namespace deepinfer
