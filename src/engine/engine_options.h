// EngineOptions: the engine's knobs, with serving defaults. The CLI and server map their flags
// (--block-size, --max-num-batched-tokens, --max-num-seqs, --kv-cache-memory,
// --kv-cache-memory-fraction, --kv-cache-dtype, --no-prefix-caching, --max-model-len, --seed,
// --speculative, --num-speculative-tokens) onto these fields.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"
#include "engine/draft_gate.h"

namespace deepinfer {

// Speculative decoding: where draft tokens come from (engine_core.h says how they are verified):
// n-gram lookup in the sequence's tokens (ngram_drafter.h), or the model's MTP block
// (mtp_drafter.h; the model loaded with ModelOptions::mtp_drafting).
enum class SpeculativeMethod { kNone, kNgram, kMtp };

inline constexpr int kMaxSpeculativeTokens = 16;  // --num-speculative-tokens at most

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
  SpeculativeMethod speculative = SpeculativeMethod::kNone;
  int num_speculative_tokens = 3;          // drafts per sequence and step, [1, kMaxSpeculativeTokens]
  // Drafts only while at most this many sequences decode: beyond, a step is no longer bound by
  // reading the weights and verifying drafts would cost more than it saves.
  int speculative_max_batch = 8;
  // Below it, per sequence: the draft length and pauses from the drafts' acceptance and cost (draft_gate.h).
  DraftGateOptions speculative_gate;

  Status validate() const;
  // The KV cache budget in bytes: kv_cache_memory_bytes, or the fraction of available memory.
  Result<size_t> kv_cache_budget() const;
};

}  // namespace deepinfer
