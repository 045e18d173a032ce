// V4LayerBinder: the binding steps a DeepSeek-V4 layer and a V4.1 layer share, by the published
// names under a layer prefix `p` ("layers.N." or "mtp.N."): hyper-connection parameters, the
// attention's query, K=V and output projections and sinks, the indexer's query side, the
// router's sizes, routed and shared experts. Shapes come from the shared config fields (errors
// as BlockScaledBinder's).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "model/deepseek_v4/block_scaled_weights.h"
#include "model/deepseek_v4/clamped_moe.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/hyper_connection.h"
#include "model/deepseek_v4/indexer.h"
#include "model/deepseek_v4/sqrtsoftplus_router.h"
#include "model/expert_group.h"

namespace deepinfer {

class V4LayerBinder : public BlockScaledBinder {
 public:
  V4LayerBinder(const Checkpoint& ckpt, const std::string& dir, const V4SharedFields& c,
                std::deque<std::vector<uint8_t>>& owned, size_t& n_params, size_t& n_bytes)
      : BlockScaledBinder(ckpt, dir, c.quant, owned, n_params, n_bytes), fields_(c) {}

  // `prefix`_fn F32 [n_mix, hc_mult * hidden], `prefix`_base [n_mix], `prefix`_scale [n_scale].
  HyperConnectionWeights hc(const std::string& prefix, int64_t n_mix, int64_t n_scale);

  // attn.wq_a, q_norm, wq_b, wkv, kv_norm, wo_a (split into its head groups), wo_b and attn_sink
  // into `a`, V4's or V4.1's attention weights (the same fields).
  template <class AttentionWeights>
  void attention_projections(const std::string& p, AttentionWeights& a) {
    const int64_t d = fields_.hidden_size, H = fields_.num_attention_heads, hd = fields_.head_dim;
    a.wq_a = linear(p + "attn.wq_a", fields_.q_lora_rank, d);
    a.q_norm = floats(p + "attn.q_norm.weight", {fields_.q_lora_rank});
    a.wq_b = linear(p + "attn.wq_b", H * hd, fields_.q_lora_rank);
    a.wkv = linear(p + "attn.wkv", hd, d);
    a.kv_norm = floats(p + "attn.kv_norm.weight", {hd});
    a.wo_a = wo_a_groups(p + "attn.wo_a");
    a.wo_b = linear(p + "attn.wo_b", d, int64_t(fields_.o_groups) * fields_.o_lora_rank);
    a.sink = floats(p + "attn.attn_sink", {H});
  }

  // attn.indexer.wq_b and weights_proj, with the indexer's sizes, into `ix`.
  void indexer_query(const std::string& p, IndexerWeights& ix);
  // The router's sizes and routed_scaling_factor; its bias or tid2eid and V4.1's gate_temp are
  // the caller's.
  SqrtSoftplusRouter router() const;
  // ffn.experts.E.{w1,w3,w2} for E < n_routed_experts (FP4 allowed). With a placement (expert
  // parallelism) only the experts it holds are read; the others stay unbound.
  std::vector<ExpertWeights> routed_experts(const std::string& p, const ExpertPlacement* placement = nullptr);
  // ffn.shared_experts.{w1,w3,w2}, n_shared_experts * moe_intermediate_size wide.
  ExpertWeights shared_experts(const std::string& p);

 private:
  // `prefix` [o_groups * o_lora_rank, heads * head_dim / o_groups] as one weight per head group g
  // (its rows g * o_lora_rank ..); empty after an error.
  std::vector<LinearWeight> wo_a_groups(const std::string& prefix);

  const V4SharedFields& fields_;
};

}  // namespace deepinfer
