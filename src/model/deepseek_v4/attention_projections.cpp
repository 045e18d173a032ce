#include "model/deepseek_v4/attention_projections.h"

#include <cmath>

namespace deepinfer {

void v4_attention_query(Backend& backend, const DeepseekV4Config& c, const V4AttentionWeights& a, const float* xn,
                        int64_t n, const int32_t* positions, const float* inv_freq, float* qr, float* q) {
  const int64_t d = c.hidden_size, H = c.num_attention_heads, hd = c.head_dim, rank = c.q_lora_rank;
  const int rd = c.qk_rope_head_dim;
  const float eps = float(c.rms_norm_eps);
  backend.linear({xn, d, n, &a.wq_a, qr, rank});
  backend.rms_norm({qr, rank, qr, rank, n, rank, a.q_norm.data(), eps});
  backend.linear({qr, rank, n, &a.wq_b, q, H * hd});
  for (int64_t i = 0; i < n * H; ++i) {  // each head RMS-normalized, without weight
    float* qh = q + i * hd;
    float sum_sq = 0;
    for (int64_t j = 0; j < hd; ++j) sum_sq += qh[j] * qh[j];
    const float inv = 1.0f / std::sqrt(sum_sq / float(hd) + eps);
    for (int64_t j = 0; j < hd; ++j) qh[j] *= inv;
  }
  backend.rope({q + hd - rd, H * hd, hd, n, int(H), rd, positions, inv_freq, 1.0f});
}

void v4_attention_kv(Backend& backend, const DeepseekV4Config& c, const V4AttentionWeights& a, const float* xn,
                     int64_t n, const int32_t* positions, const float* inv_freq, float* kv) {
  const int64_t d = c.hidden_size, hd = c.head_dim;
  const int rd = c.qk_rope_head_dim;
  backend.linear({xn, d, n, &a.wkv, kv, hd});
  backend.rms_norm({kv, hd, kv, hd, n, hd, a.kv_norm.data(), float(c.rms_norm_eps)});
  backend.rope({kv + hd - rd, hd, 0, n, 1, rd, positions, inv_freq, 1.0f});
}

void v4_attention_output(Backend& backend, const DeepseekV4Config& c, const V4AttentionWeights& a, float* o,
                         int64_t n, const int32_t* positions, const float* inv_freq, float* og,
                         std::vector<int32_t>& neg_positions, float* out) {
  const int64_t d = c.hidden_size, H = c.num_attention_heads, hd = c.head_dim;
  const int rd = c.qk_rope_head_dim;
  if (neg_positions.size() < size_t(n)) neg_positions.resize(size_t(n));
  for (int64_t r = 0; r < n; ++r) neg_positions[size_t(r)] = -positions[r];
  backend.rope({o + hd - rd, H * hd, hd, n, int(H), rd, neg_positions.data(), inv_freq, 1.0f});
  const int64_t G = c.o_groups, o_lora = c.o_lora_rank, group_in = H * hd / G;
  for (int64_t g = 0; g < G; ++g)
    backend.linear({o + g * group_in, H * hd, n, &a.wo_a[size_t(g)], og + g * o_lora, G * o_lora});
  backend.linear({og, G * o_lora, n, &a.wo_b, out, d});
}

}  // namespace deepinfer
