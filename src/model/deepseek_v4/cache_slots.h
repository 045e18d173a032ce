// Where DeepSeek-V4 keeps its state in the engine's cache (CausalLM::kv_kinds).
//
// Window kinds (a lookback each): per token and layer, entries laid out like MLA latent entries
// (MlaCacheLayout); a block holds, for each layer with an entry in that kind, [block_size] of them.
//   kv entry      {dtype, aligned(head_dim - rope), rope}: the token's K=V (kv_norm, RoPE), read by
//                 the sliding window: lookback sliding_window - 1;
//   inputs entry  (r > 0) {dtype, width, 0}: the compressor's per-token inputs comp_kv, comp_score
//                 (wkv x and wgate x + ape[t % r], [coff * head_dim] each, coff = 2 when the windows
//                 overlap, ratio 4) and at r == 4 the indexer compressor's idx_kv, idx_score
//                 ([2 * index_head_dim] each): lookback coff * r - 1, what completing a group reads.
// So the state of an incomplete compression group is the per-token inputs of its tokens, kept
// as long as a group can still need them. Entries of equal lookback share a kind (V4-Flash:
// 127 for the window and the ratio-128 inputs, 7 for the ratio-4 inputs).
// The compressed kind (kept for the whole sequence), only if some layer compresses: per layer of
// ratio r, max(1, block_size / r) entry slots per block. Group g (tokens [g r, (g + 1) r)) has
// its entry in the block of its last token (g + 1) r - 1, slot ((g + 1) r - 1) % block_size / r:
//   entry  {dtype, head_dim - rope, rope}: softmax-pooled, normed, the last rope dims roped at
//          the group's first position (bf16 under fp8);
//   key    (r == 4) {dtype, index_head_dim, 0}: the indexer's compressed key.
// With the MTP block drafting (mtp_streams_width > 0), two more window kinds, after those:
//   mtp window    {dtype, aligned(head_dim - rope), rope}: the MTP block's K=V entry of position p,
//                 made from (h_{p-1}, s[p]): the MTP block's own positions shifted by one, which
//                 RoPE (relative) and its sliding-only attention do not see; none at position 0.
//                 Lookback sliding_window - 1;
//   mtp streams   [mtp_streams_width] f32: the hc_mult streams h_p of position p as the last
//                 block leaves them (what the MTP block reads). Lookback 1.
// So the step that computes position p writes its MTP entry, reading h_{p-1} from its own rows
// or, for a chunk's first row, from the streams kind.
// Every piece of state is written by the step that computes its token into that token's blocks:
// chunked prefill, preemption, forks, speculative rollback and prefix hits restore it exactly
// like the V3 latent, and a prefix hit needs only the window blocks its lookbacks read.
// Regions of an entry start at multiples of 128 elements so that fp8 storage (per-128 scales)
// quantizes them independently.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "model/forward_batch.h"

namespace deepinfer {

struct V4LayerSlots {
  int ratio = 0;
  MlaCacheLayout kv;          // window kind kv_kind, at kv_offset of its blocks
  int kv_kind = 0;
  size_t kv_offset = 0;
  MlaCacheLayout inputs;      // ratio > 0: window kind inputs_kind, at inputs_offset
  int inputs_kind = -1;
  size_t inputs_offset = 0;
  int comp_kv = -1;           // element offsets in the inputs entry; -1: absent in this layer
  int comp_score = -1;        // [coff * head_dim]
  int idx_kv = -1;            // [2 * index_head_dim]
  int idx_score = -1;         // [2 * index_head_dim]
  MlaCacheLayout entry;       // ratio > 0: the compressed kind, slots_per_block entries at entry_offset
  MlaCacheLayout key;         // ratio == 4: as many keys at key_offset
  int slots_per_block = 0;
  size_t entry_offset = 0;
  size_t key_offset = 0;
};

struct V4CacheSlots {
  static constexpr int kRegionAlign = MlaCacheLayout::kFp8GroupSize;
  int block_size = 0;
  std::vector<KvKindSpec> kinds;  // the window kinds, then the compressed one (if any)
  int compressed_kind = -1;
  std::vector<V4LayerSlots> layers;
  int mtp_kv_kind = -1;       // -1: no MTP kinds
  int mtp_streams_kind = -1;
  MlaCacheLayout mtp_kv;
  int mtp_streams_width = 0;  // hc_mult * hidden

  // compress_ratios per layer (MTP excluded). An error unless every ratio divides the block
  // size or is a multiple of it, and dtype is F32, BF16 or F8_E4M3.
  static Result<V4CacheSlots> make(const std::vector<int>& compress_ratios, int head_dim, int rope_dim,
                                   int index_head_dim, int sliding_window, DType dtype, int block_size,
                                   int mtp_streams_width = 0);

  // The entries of `position` in `layer`, and the compressed entry and key of group g.
  uint8_t* kv_entry(const KvCacheView& kv, const BatchSequence& s, int layer, int32_t position) const;
  uint8_t* inputs_entry(const KvCacheView& kv, const BatchSequence& s, int layer, int32_t position) const;
  uint8_t* compressed_entry(const KvCacheView& kv, const BatchSequence& s, int layer, int32_t group) const;
  uint8_t* index_key(const KvCacheView& kv, const BatchSequence& s, int layer, int32_t group) const;
  // The MTP kinds' entries of `position` (>= 1 for the K=V entry); tables as in BatchSequence.
  uint8_t* mtp_kv_entry(const KvCacheView& kv, const int32_t* const* block_tables, int32_t position) const;
  float* mtp_streams(const KvCacheView& kv, const int32_t* const* block_tables, int32_t position) const;
};

// Latent elements [offset, offset + n) of one entry, from or to f32; offset must start a region
// (fp8: each 128-group gets scale amax / 448 from the values written).
void store_latent(uint8_t* entry, const MlaCacheLayout& layout, int offset, const float* src, int n);
void load_latent(const uint8_t* entry, const MlaCacheLayout& layout, int offset, float* dst, int n);
// The roped part (bf16 under fp8 storage).
void store_rope(uint8_t* entry, const MlaCacheLayout& layout, const float* src);
void load_rope(const uint8_t* entry, const MlaCacheLayout& layout, float* dst);

}  // namespace deepinfer
