// Where a DeepSeek-V4 layer keeps its state in the engine's paged per-token cache.
//
// Every token owns one entry per layer (the KvCacheView's MlaCacheLayout: a "latent" part of
// kv_lora_rank elements and a roped part of qk_rope_head_dim elements, in the cache dtype).
// A V4 layer of compress ratio r puts there:
//   kv_nope, rope part   the token's K=V (kv_norm, RoPE), read by the sliding window;
//   comp_kv, comp_score  (r > 0) the compressor's per-token inputs: wkv x and wgate x + ape[t % r],
//                        [coff * head_dim] each (coff = 2 when the windows overlap, ratio 4);
//   comp_entry           (r > 0) at the last token of each group of r: the compressed entry
//                        (softmax-pooled, normed, roped at the group's first position);
//   idx_kv, idx_score, idx_key   (r == 4) the same for the indexer's compressor.
// So the compressor state of an incomplete group is the per-token inputs of its tokens, and
// every piece of state lives with the token whose step produced it: chunked prefill, preemption,
// forks and prefix-cache hits restore it exactly like the V3 latent. Each region starts at a
// multiple of 128 elements so that fp8 storage (per-128 scales) quantizes regions independently.
#pragma once

#include <cstdint>
#include <vector>

#include "model/forward_batch.h"

namespace deepinfer {

struct V4LayerSlots {  // element offsets in the latent part; -1: absent in this layer
  int kv_nope = 0;     // [head_dim - qk_rope_head_dim]
  int comp_kv = -1;    // [coff * head_dim]
  int comp_score = -1; // [coff * head_dim]
  int comp_entry = -1; // [head_dim]
  int idx_kv = -1;     // [2 * index_head_dim]
  int idx_score = -1;  // [2 * index_head_dim]
  int idx_key = -1;    // [index_head_dim]
};

struct V4CacheSlots {
  static constexpr int kRegionAlign = MlaCacheLayout::kFp8GroupSize;
  int latent_width = 0;  // the cache's kv_lora_rank: the widest layer
  int rope_dim = 0;      // the cache's qk_rope_head_dim
  std::vector<V4LayerSlots> layers;

  // compress_ratios per layer (MTP excluded).
  static V4CacheSlots make(const std::vector<int>& compress_ratios, int head_dim, int rope_dim, int index_head_dim);
};

// KV bytes of the architecture's compact layout (what DeepSeek's own kernels keep), for
// comparison with the per-token layout above: per token, amortized, one compressed entry per
// `ratio` tokens in each compressed layer plus one indexer key per 4 tokens in each CSA layer;
// per sequence, the sliding window's `sliding_window` raw entries in every layer.
//   bf16: entries head_dim x 2 B, indexer keys index_head_dim x 2 B.
//   fp8 (DeepSeek's layout): entries (head_dim - rope) e4m3 + one UE8M0 scale per 64 of them +
//        rope x 2 B (bf16); indexer keys FP4 e2m1 (index_head_dim / 2 B) + one UE8M0 scale per 32.
struct V4CompactKvBytes {
  double per_token = 0;     // bytes per token of context, all layers
  size_t per_sequence = 0;  // bytes of one sequence's full window, all layers
};
V4CompactKvBytes v4_compact_kv_bytes(const std::vector<int>& compress_ratios, int head_dim, int rope_dim,
                                     int index_head_dim, int sliding_window, bool fp8);

// The entry of `position` in one layer's paged cache (block table of its sequence).
inline uint8_t* cache_entry(uint8_t* layer_base, const MlaCacheLayout& layout, int block_size,
                            const int32_t* block_table, int32_t position) {
  const size_t slot = size_t(block_table[position / block_size]) * size_t(block_size) + size_t(position % block_size);
  return layer_base + slot * layout.bytes_per_token();
}

// Latent elements [offset, offset + n) of one entry, from or to f32; offset must start a region
// (fp8: each 128-group gets scale amax / 448 from the values written).
void store_latent(uint8_t* entry, const MlaCacheLayout& layout, int offset, const float* src, int n);
void load_latent(const uint8_t* entry, const MlaCacheLayout& layout, int offset, float* dst, int n);
// The roped part (bf16 under fp8 storage).
void store_rope(uint8_t* entry, const MlaCacheLayout& layout, const float* src);
void load_rope(const uint8_t* entry, const MlaCacheLayout& layout, float* dst);

}  // namespace deepinfer
