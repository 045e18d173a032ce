// The projections around DeepSeek-V4's attention, shared by the main layers and the MTP block:
//   query:  qr = q_norm(wq_a xn); q = wq_b qr, each head RMS-normalized without weight, then
//           RoPE (interleaved pairs) on the last qk_rope_head_dim dims of every head
//   kv:     kv = kv_norm(wkv xn), RoPE on its last qk_rope_head_dim dims (one K=V head)
//   output: RoPE by -position on each head's last rope dims; heads split into o_groups
//           consecutive groups, group g through wo_a[g]; concatenated through wo_b
// Which keys the query attends (window, compressed entries) is the caller's business.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/weights.h"

namespace deepinfer {

// xn: [n, hidden]; positions: [n]; inv_freq: [qk_rope_head_dim / 2].
// Writes qr [n, q_lora_rank] and q [n, heads, head_dim].
void v4_attention_query(Backend& backend, const DeepseekV4Config& c, const V4AttentionWeights& a, const float* xn,
                        int64_t n, const int32_t* positions, const float* inv_freq, float* qr, float* q);

// xn: [n, hidden]; writes kv [n, head_dim].
void v4_attention_kv(Backend& backend, const DeepseekV4Config& c, const V4AttentionWeights& a, const float* xn,
                     int64_t n, const int32_t* positions, const float* inv_freq, float* kv);

// o: [n, heads, head_dim], the attention's output, rotated back in place; og: scratch
// [n, o_groups * o_lora_rank]; neg_positions: scratch; out: [n, hidden].
void v4_attention_output(Backend& backend, const DeepseekV4Config& c, const V4AttentionWeights& a, float* o,
                         int64_t n, const int32_t* positions, const float* inv_freq, float* og,
                         std::vector<int32_t>& neg_positions, float* out);

}  // namespace deepinfer
