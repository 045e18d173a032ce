// The contract between the engine and a model's forward pass: one step's tokens for many
// sequences of different lengths, and the paged KV cache they read and write.
//
// A step holds, for each scheduled sequence, n_new consecutive new tokens (a prefill chunk or
// a single decode token). Rows of the batch are those tokens, sequence after sequence. Each
// new token's state (KV, and whatever else the model keeps) is written into the cache through
// its sequence's block tables before attention, and every new token attends causally to the
// cached positions of its own sequence up to itself.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace deepinfer {

// Per-token, per-layer layout of the MLA latent cache (DeepSeek-V2/V3's one kind of state).
//   F32 / BF16: [kv_lora_rank + qk_rope_head_dim] elements of that dtype: the normalized latent,
//               then the roped key part.
//   F8_E4M3:    [kv_lora_rank] e4m3 latent, then [kv_lora_rank / 128] f32 scales (one per
//               128-element group, amax / 448), then [qk_rope_head_dim] bf16 roped key part.
struct MlaCacheLayout {
  DType dtype = DType::BF16;  // F32, BF16 or F8_E4M3
  int kv_lora_rank = 0;
  int qk_rope_head_dim = 0;

  static constexpr int kFp8GroupSize = 128;
  size_t bytes_per_token() const {
    switch (dtype) {
      case DType::F8_E4M3:
        return size_t(kv_lora_rank) + size_t((kv_lora_rank + kFp8GroupSize - 1) / kFp8GroupSize) * 4 +
               size_t(qk_rope_head_dim) * 2;
      default:
        return size_t(kv_lora_rank + qk_rope_head_dim) * dtype_size(dtype);
    }
  }
};

// A model keeps at most this many kinds of per-layer state (engine/kv_kind.h).
inline constexpr int kMaxKvKinds = 6;

// One kind of per-layer state as the model lays it out (CausalLM::kv_kinds) and the engine
// allocates it: memory [n_slabs][n_blocks][bytes_per_block], where block b of every slab holds
// the same tokens of one sequence, and block i of a sequence's table covers its tokens
// [i * block_size, (i + 1) * block_size). What a block holds for those tokens is the model's
// business (per-token entries, one entry per r tokens, ...).
struct KvKindSpec {
  std::string name;            // for the load log, e.g. "latent", "window", "compressed"
  int n_slabs = 1;             // e.g. one per layer (V3's latent), or 1 with the layers inside a block
  size_t bytes_per_block = 0;  // per slab
  // 0: a sequence keeps all its blocks of this kind while it lives. > 0: a step whose first new
  // token is at position p reads this kind only at positions >= p - lookback, so the blocks
  // wholly before that go back to the pool (their table entries become -1).
  int lookback = 0;
};

// KV bytes one token costs in the kinds that keep every block (amortized over a block), and the
// most one sequence holds at once in the lookback kinds (a block more than its lookback spans,
// plus the block being written).
double kv_bytes_per_token(const std::vector<KvKindSpec>& kinds, int block_size);
size_t kv_bytes_per_sequence_window(const std::vector<KvKindSpec>& kinds, int block_size);

// One kind's memory as the model sees it.
struct KvKindView {
  int n_blocks = 0;
  size_t bytes_per_block = 0;
  std::vector<uint8_t*> slab_base;  // [n_slabs], each [n_blocks][bytes_per_block]
  uint8_t* block(int slab, int32_t block_id) const {
    return slab_base[size_t(slab)] + size_t(block_id) * bytes_per_block;
  }
};

// The paged cache as the model sees it: every kind of CausalLM::kv_kinds, in that order.
struct KvCacheView {
  DType dtype = DType::BF16;  // the cache dtype the kinds were laid out for
  int block_size = 0;         // tokens per block
  std::vector<KvKindView> kinds;
};

// One sequence's part of a step.
struct BatchSequence {
  int32_t row_begin = 0;             // first batch row of this sequence's new tokens
  int32_t n_new = 0;                 // new tokens this step (>= 1)
  int32_t n_ctx = 0;                 // cached tokens after this step: positions [0, n_ctx)
  // Per kind: [ceil(n_ctx / block_size)] block ids, in order; -1 where a lookback kind has
  // released a block (only before the lookback of the step's first new token).
  std::array<const int32_t*, kMaxKvKinds> block_tables{};
};

struct ForwardBatch {
  std::vector<int32_t> token_ids;      // [n_rows]
  std::vector<int32_t> positions;      // [n_rows]; row r of sequence s: s.n_ctx - s.n_new + (r - s.row_begin)
  std::vector<BatchSequence> seqs;     // rows are contiguous per sequence, in this order
  std::vector<int32_t> logit_rows;     // rows whose next-token logits are wanted, ascending
  // Provenance (CausalLM's determinism contract): [n_rows], 1 where the row's token came in its
  // request's prompt (position < the prompt's length), 0 where the model generated it (sampled
  // tokens, also when a preempted sequence recomputes them, and speculative drafts). Empty:
  // every row is a generated row.
  std::vector<uint8_t> prompt_rows;

  size_t n_rows() const { return token_ids.size(); }
  bool is_prompt_row(size_t row) const { return !prompt_rows.empty() && prompt_rows[row] != 0; }
};

}  // namespace deepinfer
