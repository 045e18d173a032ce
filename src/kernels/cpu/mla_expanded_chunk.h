// What the expanded MLA attention driver (mla_expanded_attention.cpp) hands the per-ISA kernel
// (mla_expanded_attention_kernels.h, or on AMX mla_expanded_attention_amx.h): one sequence's rows
// and one chunk of its positions with their keys and values already expanded, and the rows'
// online-softmax state across chunks.
#pragma once

#include <cstdint>
#include <vector>

#include "core/aligned_vector.h"
#include "kernels/ops.h"

namespace deepinfer::cpu {

// One sequence's state across the chunks of its positions, and the chunk buffers; reused.
struct ExpandedState {
  int n_rows = 0;                         // the sequence's rows this step
  AlignedVector<float> run_max, run_sum;  // [n_rows, n_heads]
  AlignedVector<float> acc;               // [n_rows, n_heads, v_head_dim], unnormalized
  AlignedVector<uint16_t> q_bf16;         // [n_rows, n_heads, pairs of qk_nope + rope] (dot BF16, pair dots)
  AlignedVector<float> q_round;           // [n_rows, n_heads, qk_nope + rope] (dot BF16, no pair dots)
  // The chunk's keys [k_nope | k_pe] and values, padded with zeros to whole kAttendKeyBlock blocks
  // (n_pad keys), laid out as mla_expanded_attention_kernels.h says (on AMX, q_bf16, keys_bf16 and
  // value_pairs as mla_expanded_attention_amx.h says: padded to whole tile operands):
  AlignedVector<float> keys;              // [n_heads, n_pad / kW, qk_nope + rope, kW]
  AlignedVector<uint16_t> keys_bf16;      // [n_heads, n_pad / 16, pairs, 16, 2] (pair dots)
  AlignedVector<float> values;            // [n_heads, n_pad, v_head_dim]
  AlignedVector<uint16_t> value_pairs;    // [n_heads, n_pad / 2, v_head_dim, 2] (pair dots)
};

struct ExpandedChunk {
  const MlaExpandedAttentionParams* p = nullptr;
  const BatchSequence* seq = nullptr;
  int32_t key_begin = 0;       // first position of the chunk, a multiple of kAttendKeyBlock
  int n_keys = 0;              // positions [key_begin, key_begin + n_keys)
  const float* kv = nullptr;   // [n_keys, n_heads * (qk_nope + v_head_dim)]: kv_b_proj of their latents
  const float* k_pe = nullptr; // [n_keys, rope]: their roped key parts as f32
  ExpandedState* state = nullptr;
};

}  // namespace deepinfer::cpu
