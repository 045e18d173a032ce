#include "model/deepseek_v4/layer_binder.h"

namespace deepinfer {

HyperConnectionWeights V4LayerBinder::hc(const std::string& prefix, int64_t n_mix, int64_t n_scale) {
  HyperConnectionWeights h;
  h.fn = f32_linear(prefix + "_fn", n_mix, int64_t(fields_.hc_mult) * fields_.hidden_size);
  h.base = floats(prefix + "_base", {n_mix});
  h.scale = floats(prefix + "_scale", {n_scale});
  return h;
}

std::vector<LinearWeight> V4LayerBinder::wo_a_groups(const std::string& prefix) {
  const int64_t G = fields_.o_groups, o_lora = fields_.o_lora_rank;
  const int64_t group_in = int64_t(fields_.num_attention_heads) * fields_.head_dim / G;
  const LinearWeight wo_a = linear(prefix, G * o_lora, group_in);
  std::vector<LinearWeight> parts;
  for (int64_t g = 0; g < G && status().ok(); ++g) {
    LinearWeight part = wo_a;
    part.n_out = o_lora;
    part.data = static_cast<const uint8_t*>(wo_a.data) + size_t(g * o_lora * group_in) * dtype_size(wo_a.dtype);
    if (wo_a.scale_inv)
      part.scale_inv = wo_a.scale_inv + (g * o_lora / wo_a.block_rows) * ((group_in + wo_a.block_cols - 1) / wo_a.block_cols);
    parts.push_back(part);
  }
  return parts;
}

void V4LayerBinder::indexer_query(const std::string& p, IndexerWeights& ix) {
  ix.n_heads = fields_.index_n_heads;
  ix.head_dim = fields_.index_head_dim;
  ix.topk = fields_.index_topk;
  ix.wq_b = linear(p + "attn.indexer.wq_b", int64_t(fields_.index_n_heads) * fields_.index_head_dim, fields_.q_lora_rank);
  ix.weights_proj = linear(p + "attn.indexer.weights_proj", fields_.index_n_heads, fields_.hidden_size);
}

SqrtSoftplusRouter V4LayerBinder::router() const {
  SqrtSoftplusRouter r;
  r.n_experts = fields_.n_routed_experts;
  r.top_k = fields_.num_experts_per_tok;
  r.routed_scaling_factor = float(fields_.routed_scaling_factor);
  return r;
}

std::vector<ExpertWeights> V4LayerBinder::routed_experts(const std::string& p, const ExpertPlacement* placement) {
  const int64_t d = fields_.hidden_size, inter = fields_.moe_intermediate_size;
  std::vector<ExpertWeights> experts;
  for (int e = 0; e < fields_.n_routed_experts && status().ok(); ++e) {
    if (placement && !placement->holds(e)) {
      experts.emplace_back();
      continue;
    }
    const std::string q = p + "ffn.experts." + std::to_string(e) + ".";
    experts.push_back({linear(q + "w1", inter, d, true), linear(q + "w3", inter, d, true), linear(q + "w2", d, inter, true)});
  }
  return experts;
}

ExpertWeights V4LayerBinder::shared_experts(const std::string& p) {
  const int64_t d = fields_.hidden_size, si = int64_t(fields_.n_shared_experts) * fields_.moe_intermediate_size;
  const std::string q = p + "ffn.shared_experts.";
  return {linear(q + "w1", si, d), linear(q + "w3", si, d), linear(q + "w2", d, si)};
}

}  // namespace deepinfer
