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
// forward() keeps the K=V entries in a buffer of one call: the call covers consecutive positions
// of one sequence and its window starts at the call's first position. For drafting, the model's
// forward keeps them in the engine's cache instead (cache_slots.h: the MTP kinds, positions
// shifted by one), each made by kv_entries(), and draft() reads them there.
#pragma once

#include <cstdint>
#include <span>
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
  // The K=V entries the block's attention makes for rows (h, s) at `positions` (the block's
  // attention input, projected and roped): streams [n, hc_mult, hidden], next_ids [n], kv [n, head_dim].
  void kv_entries(const float* streams, const int32_t* next_ids, const int32_t* positions, int64_t n, float* kv);
  // CausalLM::draft from the MTP kinds of `slots` in `kv`: a query at position q = n_ctx reads
  // h_{q-1} from the streams kind and attends to the cached entries of positions
  // [max(1, q - window + 1), q - 1] and its own; its argmax (lowest id on ties) is the draft.
  // Draft j + 1 follows at q + j + 1 with the block's output streams of draft j as h and draft j
  // as the token, attending also to the entries of drafts 0 .. j (kept in this call only).
  void draft(std::span<const DraftQuery> queries, const V4CacheSlots& slots, const KvCacheView& kv, int32_t* drafts);

 private:
  V4MtpBlock(const DeepseekV4Model& model, const V4MtpWeights& w);
  // x_ = the block's input streams from h (streams) and next_ids, then hc_attn's mix (post_,
  // comb_) and xn_ = attn_norm of it: [n, hidden].
  void attention_input(const float* streams, const int32_t* next_ids, int64_t n);
  // From the attention's output out_ [n, hidden]: hc_post, the MoE sublayer, hc_post (x_ is then
  // the block's output streams), and logits [n, vocab].
  void finish(const int32_t* next_ids, int64_t n, float* logits);
  // xn: [n, hidden] the normed attention input; out: [n, hidden].
  void attention(const float* xn, int64_t n, float* out);

  const DeepseekV4Config* config_;
  const DeepseekV4Weights* model_weights_;
  const V4MtpWeights* w_;
  Backend* backend_;
  HyperConnectionDims hc_;
  std::vector<float> inv_freq_;  // [qk_rope_head_dim / 2] rope_theta, no YaRN
  std::vector<int32_t> positions_;
  std::vector<float> x_, y_, xn_, out_, post_, comb_, mixes_, qr_, q_, kv_, o_, og_, gate_logits_,
      expert_weights_;
  std::vector<int32_t> expert_ids_, neg_positions_, head_rows_;
  std::vector<float> h_, keys_, draft_kv_, draft_logits_;  // draft(): streams, keys, in-flight K=V
  std::vector<int32_t> draft_ids_, draft_query_;
  ClampedMoeScratch moe_;
};

// The probe of the block against its reference: the main model over ids[0 .. L-2] (one sequence,
// one step, a private f32 cache of the model's own kinds), its last block's streams at every
// position, then the block over t = 0 .. L-2 with s[t+1] = ids[t+1]. Returns logits
// [L-1, vocab], row t predicting ids[t+2]. Errors: fewer than 2 ids, an id outside the
// vocabulary, no MTP block.
Result<std::vector<float>> v4_mtp_probe_logits(DeepseekV4Model& model, const std::vector<int32_t>& ids);

}  // namespace deepinfer
