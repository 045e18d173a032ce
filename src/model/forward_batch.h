// The contract between the engine and a model's forward pass: one step's tokens for many
// sequences of different lengths, and the paged KV cache they read and write.
//
// A step holds, for each scheduled sequence, n_new consecutive new tokens (a prefill chunk or
// a single decode token). Rows of the batch are those tokens, sequence after sequence. Each
// new token's latent KV is written into the cache at its position before attention, and every
// new token attends causally to all cached positions of its own sequence up to itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace deepinfer {

// Per-token, per-layer layout of the MLA latent cache (one "kind" of per-layer state; the
// sliding-window and compressed kinds of DeepSeek-V4 get their own layouts beside it).
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

// The paged cache as the model sees it: for every layer, a base pointer to
// [num_blocks, block_size, layout.bytes_per_token()] bytes. Block ids index the first dimension.
struct KvCacheView {
  MlaCacheLayout layout;
  int block_size = 0;                // tokens per block
  int num_blocks = 0;
  std::vector<uint8_t*> layer_base;  // [n_layers]
};

// One sequence's part of a step.
struct BatchSequence {
  int32_t row_begin = 0;             // first batch row of this sequence's new tokens
  int32_t n_new = 0;                 // new tokens this step (>= 1)
  int32_t n_ctx = 0;                 // cached tokens after this step: positions [0, n_ctx)
  const int32_t* block_table = nullptr;  // [ceil(n_ctx / block_size)] block ids, in order
};

struct ForwardBatch {
  std::vector<int32_t> token_ids;      // [n_rows]
  std::vector<int32_t> positions;      // [n_rows]; row r of sequence s: s.n_ctx - s.n_new + (r - s.row_begin)
  std::vector<BatchSequence> seqs;     // rows are contiguous per sequence, in this order
  std::vector<int32_t> logit_rows;     // rows whose next-token logits are wanted, ascending

  size_t n_rows() const { return token_ids.size(); }
};

}  // namespace deepinfer
