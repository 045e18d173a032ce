// DeepseekModel: DeepSeek-V2/V3 (MLA + DeepSeekMoE) forward pass on a Backend, in f32 with
// weights dequantized in the kernels. The cache holds only the normalized latent and the roped
// key part per token and layer. Attention by provenance (CausalLM's contract): generated rows run
// MLA absorbed (queries into the latent space, kv_b_proj applied to the attention output);
// prompt rows, with ModelOptions::prefill_attention kExpanded (the default), run it expanded
// (kv_b_proj applied to each cached latent of the sequence, per-head keys and values). A step
// holding both splits its rows between the two ops; each row's result is that of its own op.
//
// Drafting (ModelOptions::mtp_drafting, checkpoints with num_nextn_predict_layers >= 1): the
// first MTP layer (MtpLayerWeights; DeepSeek-V3 technical report section 2.2, as vLLM's
// deepseek_mtp.py and SGLang's deepseek_nextn.py run it) proposes drafts (mtp_layer.cpp). The
// layer's input for the pair (h_i, t_{i+1}) is eh_proj([enorm(embed(t_{i+1})) | hnorm(h_i)]),
// h_i the main model's last hidden state after the final norm; its attention is causal over the
// pairs i' <= i with RoPE at position i; it predicts t_{i+2}. forward() keeps two more kinds: the
// layer's latent entries ("mtp_latent", all blocks kept), the entry of pair (h_{p-1}, s[p]) in
// slot p (written by the step that computes position p, so a block is complete when its tokens
// are; slot 0 holds nothing), and h_p itself ("mtp_hidden", lookback 1). draft() then chains
// greedy drafts: pair (h_{n-1}, token) first, then (the layer's output before shared_head.norm,
// the draft), each attending to the cached entries and the call's own in-flight ones.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/aligned_vector.h"
#include "kernels/ops.h"
#include "model/causal_lm.h"
#include "model/config.h"
#include "model/deepseek/weights.h"
#include "model/expert_parallel_moe.h"
#include "model/deepseek/yarn_rope.h"
#include "model/safetensors.h"

namespace deepinfer {

class DeepseekModel final : public CausalLM {
 public:
  static Result<std::unique_ptr<DeepseekModel>> Load(const std::string& model_dir, const ModelOptions& options,
                                                      Backend& backend);

  const CausalLMInfo& info() const override { return info_; }
  bool kv_depends_on_provenance() const override { return prefill_attention_ == PrefillAttention::kExpanded; }
  // "latent": a slab per layer of [block_size] MlaCacheLayout entries per block. Drafting adds
  // "mtp_latent" (one slab of MlaCacheLayout entries) and "mtp_hidden" ([block_size, hidden] f32).
  Result<std::vector<KvKindSpec>> kv_kinds(DType cache_dtype, int block_size) const override;
  void forward(const ForwardBatch& batch, const KvCacheView& kv, float* logits) override;
  bool can_draft() const override { return weights_->mtp != nullptr; }
  void draft(std::span<const DraftQuery> queries, const KvCacheView& kv, int32_t* drafts) override;
  // The MTP layer's logits for the first draft of each query ([queries.size(), vocab]): draft()'s
  // first step, for probes and tests. Precondition: can_draft(), each n_ctx >= 1.
  void draft_logits(std::span<const DraftQuery> queries, const KvCacheView& kv, float* logits);

  const ModelConfig& config() const { return config_; }
  const DeepseekWeights& weights() const { return *weights_; }

 private:
  DeepseekModel(ModelConfig c, Checkpoint ckpt, std::unique_ptr<DeepseekWeights> w, const ModelOptions& options,
                Backend& backend);

  // Each stage reads and writes the scratch buffers below; n = batch rows. attention: layer a's
  // MLA (expanded for the batch's prompt rows, absorbed for the rest), cache = its slab in `dtype`
  // layout, the batch's block tables of kind `kind`.
  void attention(const MlaWeights& a, const ForwardBatch& batch, uint8_t* cache, DType dtype, int block_size,
                 int kind, const float* h, float* out);
  // The attention output o ([rows, heads * v_head_dim]) of `rows` from their queries q ([rows,
  // heads * qk_head_dim], nope then roped part per head), absorbed or expanded.
  void absorbed_attention(const MlaWeights& a, const ForwardBatch& rows, const uint8_t* cache, DType dtype,
                          int block_size, int kind, const float* q, float* o);
  void expanded_attention(const MlaWeights& a, const ForwardBatch& rows, const uint8_t* cache, DType dtype,
                          int block_size, int kind, const float* q, float* o);
  // Both formulations' dot products: bf16 (scores and value sums) with bf16 activations over a
  // bf16 or fp8 cache (dtype `cache_dtype`; fp8 latents rounded to bf16 as they are read), else f32.
  DType attention_dot_dtype(DType cache_dtype) const;
  void ffn(const LayerWeights& L, const float* h, int64_t n, float* out);  // dense MLP or MoE
  void dense_mlp(const MlpWeights& w, const float* h, int64_t n, int64_t inter, float* out);
  void moe(const MoeWeights& w, const float* h, int64_t n, float* out);
  // Expert parallelism: binds exactly `held` of a layer's routed experts (ExpertParallelMoe::Rebind).
  Status rebind_experts(int layer, std::span<const int32_t> held);
  MlaCacheLayout cache_layout(DType cache_dtype) const {
    return {cache_dtype, config_.kv_lora_rank, config_.qk_rope_head_dim};
  }
  // mtp_layer.cpp. x: [n, hidden] the residual stream after the last layer. Writes each row's
  // final-normed hidden state and MTP latent entry into the drafting kinds.
  void mtp_store(const ForwardBatch& batch, const KvCacheView& kv, const float* x);
  // The MTP layer's input rows: eh_proj([enorm(embed(tokens)) | hnorm(h)]); h, out: [n, hidden].
  void mtp_input(const int32_t* tokens, const float* h, int64_t n, float* out);
  // draft() and draft_logits(): greedy chains; first_logits (nullable) gets step 0's logits.
  void mtp_chain(std::span<const DraftQuery> queries, const KvCacheView& kv, int32_t* drafts, float* first_logits);

  ModelConfig config_;
  Checkpoint ckpt_;  // owns the mappings the weights point into
  std::unique_ptr<DeepseekWeights> weights_;
  Backend& backend_;
  YarnRope rope_;
  CausalLMInfo info_;
  std::unique_ptr<ExpertParallelMoe> ep_;  // with ModelOptions::expert_group: routed experts across ranks
  std::string model_dir_;                  // for rebinding experts
  PrefillAttention prefill_attention_;

  struct Scratch {  // reused across steps; sized on demand
    AlignedVector<float> x, h, q_a, q, kv_a, latent, q_latent, o_latent, o, tmp, act, router_logits,
        expert_weights;
    std::vector<int32_t> expert_ids;
    // A step with prompt and generated rows: each part's rows as a batch of its own (prompt first)
    ForwardBatch part[2];
    std::vector<int32_t> part_rows[2];  // [part] the step's rows in it, in order
    std::vector<float> part_q, part_o;
    std::vector<MlpWeightRefs> experts;
    // MTP layer (mtp_layer.cpp)
    std::vector<float> m_h, m_prev, m_rows, m_e, m_cat, m_x, m_hn, m_tmp, m_logits;
    std::vector<int32_t> m_rope_pos, m_tokens, m_tables;
    std::vector<uint8_t> m_cache;  // draft(): each query's entries, shifted to start at position 0
  } s_;
};

// The MTP layer against its reference: the main model over ids[0 .. L-2] (one sequence, one
// step, a private f32 cache of the model's kinds), then the layer's logits for every pair
// (h_t, ids[t+1]), t = 0 .. L-2: [L-1, vocab], row t predicting ids[t+2], through draft()'s own
// path. Errors: fewer than 2 ids, an id outside the vocabulary, a model loaded without drafting.
Result<std::vector<float>> deepseek_mtp_probe_logits(DeepseekModel& model, const std::vector<int32_t>& ids);

}  // namespace deepinfer
