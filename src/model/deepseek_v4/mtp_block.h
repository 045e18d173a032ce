// DeepSeek-V4's multi-token-prediction block (mtp.N; DeepSeek's V4-Flash inference/model.py
// MTPBlock). At position t it reads the main model's hc_mult residual streams h_t as its last block
// leaves them (before hc_head and the final norm) and the token s[t+1], and predicts s[t+2]:
//   e   = enorm(embed(s[t+1]))                       (the shared embedding)
//   x_k = h_proj(hnorm(h_t[k])) + e_proj(e)          per stream k, [hc_mult, hidden]
//   one V4 block with the mtp weights: hc_attn mix, attn_norm, sliding-window attention with sinks
//   over the block's own K=V entries of positions t-window+1..t (RoPE rope_theta, no YaRN; the
//   block's compress ratio must be 0, as published), hc_post, hc_ffn mix, ffn_norm, sqrtsoftplus
//   MoE (never hash-routed; routed experts clamped, the shared one not), hc_post
//   logits = head(norm(hc_head(x)))                  (the block's own hc_head and norm, shared head)
// The K=V entries live in a buffer of one call: a call covers consecutive positions of one
// sequence and its window starts at the call's first position. Keeping them across calls (a cache
// kind of the engine, for drafting step by step) is the engine integration's part, not this one.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "kernels/ops.h"
#include "model/deepseek_v4/clamped_moe.h"
#include "model/deepseek_v4/model.h"

namespace deepinfer {

class V4MtpBlock {
 public:
  // The model's mtp.`index` block; an error if the checkpoint has none or the block compresses.
  // The model outlives the block.
  static Result<V4MtpBlock> make(const DeepseekV4Model& model, int index = 0);

  // Positions t0 .. t0 + n - 1 of one sequence. streams: [n, hc_mult, hidden] (h_t per row);
  // next_ids: [n] s[t+1], each < vocab; logits: [n, vocab], row i predicting s[t0 + i + 2].
  void forward(const float* streams, const int32_t* next_ids, int32_t t0, int64_t n, float* logits);

 private:
  V4MtpBlock(const DeepseekV4Model& model, const V4MtpWeights& w);
  // xn: [n, hidden] the normed attention input; out: [n, hidden].
  void attention(const float* xn, int64_t n, float* out);

  const DeepseekV4Config* config_;
  const DeepseekV4Weights* model_weights_;
  const V4MtpWeights* w_;
  Backend* backend_;
  HyperConnectionDims hc_;
  std::vector<float> inv_freq_;  // [qk_rope_head_dim / 2] rope_theta, no YaRN
  std::vector<int32_t> positions_;
  std::vector<float> x_, y_, xn_, out_, post_, comb_, mixes_, qr_, q_, kv_, o_, og_, scores_, gate_logits_,
      expert_weights_;
  std::vector<int32_t> expert_ids_, neg_positions_, head_rows_;
  ClampedMoeScratch moe_;
};

// The probe of the block against its reference: the main model over ids[0 .. L-2] (one sequence,
// one step, a private f32 cache of the model's own kinds), its last block's streams at every
// position, then the block over t = 0 .. L-2 with s[t+1] = ids[t+1]. Returns logits
// [L-1, vocab], row t predicting ids[t+2]. Errors: fewer than 2 ids, an id outside the
// vocabulary, no MTP block.
Result<std::vector<float>> v4_mtp_probe_logits(DeepseekV4Model& model, const std::vector<int32_t>& ids);

}  // namespace deepinfer
