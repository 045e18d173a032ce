#include "model/deepseek_v4/weights.h"

#include <cstring>

#include "model/deepseek_v4/block_scaled_weights.h"

namespace deepinfer {

class V4WeightBinder : public BlockScaledBinder {
 public:
  V4WeightBinder(const Checkpoint& ckpt, const DeepseekV4Config& c, const std::string& dir, DeepseekV4Weights& w)
      : BlockScaledBinder(ckpt, dir, c.quant, w.owned_, w.n_params, w.n_bytes), c_(c) {}

  // I64 [vocab, top_k] expert ids, each < n_experts.
  std::vector<int32_t> tid2eid(const std::string& name) {
    const TensorView* t = find(name);
    if (!t || !shape_is(*t, {c_.vocab_size, c_.num_experts_per_tok})) return {};
    if (t->dtype != DType::I64) {
      fail(*t->file + ": tensor '" + name + "' must be I64, is " + std::string(dtype_name(t->dtype)));
      return {};
    }
    std::vector<int32_t> out(size_t(t->numel()));
    for (size_t i = 0; i < out.size(); ++i) {
      int64_t v;
      std::memcpy(&v, t->data + i * 8, 8);
      if (v < 0 || v >= c_.n_routed_experts) {
        fail(*t->file + ": tensor '" + name + "' holds expert id " + std::to_string(v) + " outside [0, " +
             std::to_string(c_.n_routed_experts) + ")");
        return {};
      }
      out[i] = int32_t(v);
    }
    count(*t, 1);
    return out;
  }

  HyperConnectionWeights hc(const std::string& prefix, int64_t n_mix, int64_t n_scale) {
    HyperConnectionWeights h;
    h.fn = f32_linear(prefix + "_fn", n_mix, int64_t(c_.hc_mult) * c_.hidden_size);
    h.base = floats(prefix + "_base", {n_mix});
    h.scale = floats(prefix + "_scale", {n_scale});
    return h;
  }

  CompressorWeights compressor(const std::string& p, int ratio, int dim) {
    CompressorWeights cw;
    cw.ratio = ratio;
    cw.dim = dim;
    cw.overlap = ratio == 4;
    const int64_t width = int64_t(cw.coff()) * dim;
    cw.wkv = linear(p + "wkv", width, c_.hidden_size);
    cw.wgate = linear(p + "wgate", width, c_.hidden_size);
    cw.ape = floats(p + "ape", {ratio, width});
    cw.norm = floats(p + "norm.weight", {dim});
    return cw;
  }

  V4BlockWeights block(const std::string& p, int ratio, bool hashed) {
    const int64_t d = c_.hidden_size, H = c_.num_attention_heads, hd = c_.head_dim, n_hc = c_.hc_mult;
    V4BlockWeights B;
    B.attn_norm = floats(p + "attn_norm.weight", {d});
    B.ffn_norm = floats(p + "ffn_norm.weight", {d});
    B.hc_attn = hc(p + "hc_attn", (2 + n_hc) * n_hc, 3);
    B.hc_ffn = hc(p + "hc_ffn", (2 + n_hc) * n_hc, 3);
    V4AttentionWeights& a = B.attn;
    a.compress_ratio = ratio;
    a.wq_a = linear(p + "attn.wq_a", c_.q_lora_rank, d);
    a.q_norm = floats(p + "attn.q_norm.weight", {c_.q_lora_rank});
    a.wq_b = linear(p + "attn.wq_b", H * hd, c_.q_lora_rank);
    a.wkv = linear(p + "attn.wkv", hd, d);
    a.kv_norm = floats(p + "attn.kv_norm.weight", {hd});
    const int64_t G = c_.o_groups, o_lora = c_.o_lora_rank, group_in = H * hd / G;
    const LinearWeight wo_a = linear(p + "attn.wo_a", G * o_lora, group_in);
    if (status_.ok()) {
      for (int64_t g = 0; g < G; ++g) {  // rows g * o_lora_rank .. of wo_a, the weight of head group g
        LinearWeight part = wo_a;
        part.n_out = o_lora;
        part.data = static_cast<const uint8_t*>(wo_a.data) + size_t(g * o_lora * group_in) * dtype_size(wo_a.dtype);
        if (wo_a.scale_inv)
          part.scale_inv = wo_a.scale_inv + (g * o_lora / wo_a.block_rows) * ((group_in + wo_a.block_cols - 1) / wo_a.block_cols);
        a.wo_a.push_back(part);
      }
    }
    a.wo_b = linear(p + "attn.wo_b", d, G * o_lora);
    a.sink = floats(p + "attn.attn_sink", {H});
    if (ratio > 0) a.compressor = compressor(p + "attn.compressor.", ratio, int(hd));
    if (ratio == 4) {
      IndexerWeights& ix = a.indexer;
      ix.n_heads = c_.index_n_heads;
      ix.head_dim = c_.index_head_dim;
      ix.topk = c_.index_topk;
      ix.wq_b = linear(p + "attn.indexer.wq_b", int64_t(c_.index_n_heads) * c_.index_head_dim, c_.q_lora_rank);
      ix.weights_proj = linear(p + "attn.indexer.weights_proj", c_.index_n_heads, d);
      ix.compressor = compressor(p + "attn.indexer.compressor.", 4, c_.index_head_dim);
    }
    B.gate = linear(p + "ffn.gate", c_.n_routed_experts, d);
    B.router.n_experts = c_.n_routed_experts;
    B.router.top_k = c_.num_experts_per_tok;
    B.router.routed_scaling_factor = float(c_.routed_scaling_factor);
    if (hashed) B.router.tid2eid = tid2eid(p + "ffn.gate.tid2eid");
    else B.router.bias = floats(p + "ffn.gate.bias", {c_.n_routed_experts});
    const int64_t inter = c_.moe_intermediate_size;
    for (int e = 0; e < c_.n_routed_experts && status_.ok(); ++e) {
      const std::string q = p + "ffn.experts." + std::to_string(e) + ".";
      B.experts.push_back({linear(q + "w1", inter, d, true), linear(q + "w3", inter, d, true), linear(q + "w2", d, inter, true)});
    }
    B.has_shared = c_.n_shared_experts > 0;
    if (B.has_shared) {
      const int64_t si = int64_t(c_.n_shared_experts) * inter;
      const std::string q = p + "ffn.shared_experts.";
      B.shared = {linear(q + "w1", si, d), linear(q + "w3", si, d), linear(q + "w2", d, si)};
    }
    return B;
  }

 private:
  const DeepseekV4Config& c_;
};

Result<std::unique_ptr<DeepseekV4Weights>> DeepseekV4Weights::Bind(const Checkpoint& ckpt, const DeepseekV4Config& c,
                                                                   const std::string& model_dir) {
  auto w = std::make_unique<DeepseekV4Weights>();
  V4WeightBinder b(ckpt, c, model_dir, *w);
  const int64_t d = c.hidden_size;
  w->embed = b.linear("embed", c.vocab_size, d);
  for (int i = 0; i < c.num_hidden_layers && b.status().ok(); ++i)
    w->layers.push_back(b.block("layers." + std::to_string(i) + ".", c.compress_ratio(i), c.is_hash_layer(i)));
  w->hc_head = b.hc("hc_head", c.hc_mult, 1);
  w->norm = b.floats("norm.weight", {d});
  w->head = c.tie_word_embeddings ? w->embed : b.linear("head", c.vocab_size, d);
  for (int k = 0; k < c.num_nextn_predict_layers && b.status().ok(); ++k) {
    const std::string p = "mtp." + std::to_string(k) + ".";
    V4MtpWeights& m = w->mtp.emplace_back();
    m.enorm = b.floats(p + "enorm.weight", {d});
    m.hnorm = b.floats(p + "hnorm.weight", {d});
    m.norm = b.floats(p + "norm.weight", {d});
    m.e_proj = b.linear(p + "e_proj", d, d);
    m.h_proj = b.linear(p + "h_proj", d, d);
    m.hc_head = b.hc(p + "hc_head", c.hc_mult, 1);
    m.block = b.block(p, c.compress_ratio(c.num_hidden_layers + k), false);
  }
  if (!b.status().ok()) return b.status();
  if (w->embed.dtype == DType::F8_E4M3)
    return Status::Error(model_dir + ": tensor 'embed.weight' must not be F8_E4M3 (rows are looked up)");
  return w;
}

void DeepseekV4Weights::use_bf16_activations() {
  auto set = [](LinearWeight& w) {
    if (w.data && w.dtype == DType::BF16) w.act_dtype = DType::BF16;
  };
  for (V4BlockWeights& B : layers) {
    V4AttentionWeights& a = B.attn;
    for (LinearWeight* w : {&a.wq_a, &a.wq_b, &a.wkv, &a.wo_b, &a.compressor.wkv, &a.compressor.wgate, &a.indexer.wq_b,
                            &a.indexer.weights_proj, &a.indexer.compressor.wkv, &a.indexer.compressor.wgate})
      set(*w);
    for (LinearWeight& w : a.wo_a) set(w);
    for (ExpertWeights& e : B.experts) {
      set(e.w1);
      set(e.w3);
      set(e.w2);
    }
    set(B.shared.w1);
    set(B.shared.w3);
    set(B.shared.w2);
  }
  set(head);
}

}  // namespace deepinfer
