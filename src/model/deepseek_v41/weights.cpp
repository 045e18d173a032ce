#include "model/deepseek_v41/weights.h"

#include <cstring>

#include "core/check.h"
#include "model/deepseek_v4/block_scaled_weights.h"

namespace deepinfer {
namespace {

float load_scalar(DType t, const uint8_t* p) {
  switch (t) {
    case DType::F32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::BF16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return bf16_to_f32(v);
    }
    case DType::F8_E4M3: return fp8_e4m3_to_f32(*p);
    case DType::F8_E8M0: return ue8m0_to_f32(*p);
    default: DI_CHECK(false); return 0;
  }
}

class V41WeightBinder : public BlockScaledBinder {
 public:
  V41WeightBinder(const Checkpoint& ckpt, const DeepseekV41Config& c, const std::string& dir,
                  std::deque<std::vector<uint8_t>>& owned, DeepseekV41Weights& w)
      : BlockScaledBinder(ckpt, dir, c.quant, owned, w.n_params, w.n_bytes), c_(c) {}

  HyperConnectionWeights hc_weights(const std::string& prefix) {
    const int64_t n_mix = int64_t(2 + c_.hc_mult) * c_.hc_mult;
    return {f32_linear(prefix + "_fn", n_mix, int64_t(c_.hc_mult) * c_.hidden_size), floats(prefix + "_base", {n_mix}),
            floats(prefix + "_scale", {3})};
  }

  EngramTable engram_table(const std::string& prefix, int64_t rows, int64_t dim) {
    EngramTable e;
    const TensorView* t = find(prefix + ".weight");
    if (!t || !shape_is(*t, {rows, dim})) return e;
    if (t->dtype != DType::BF16 && t->dtype != DType::F32 && t->dtype != DType::F8_E4M3) {
      fail(*t->file + ": tensor '" + t->name + "' must be BF16, F32 or F8_E4M3, is " + std::string(dtype_name(t->dtype)));
      return e;
    }
    const TensorView* s = find(prefix + ".scale");
    if (!s) return e;
    if (s->shape.size() != 2 || s->shape[0] != rows || s->shape[1] < 1 || dim % s->shape[1] != 0) {
      fail(*s->file + ": tensor '" + s->name + "' has shape " + s->shape_str() + ", expected [" + std::to_string(rows) +
           ", k] with k dividing " + std::to_string(dim));
      return e;
    }
    if (s->dtype != DType::F8_E8M0 && s->dtype != DType::F32 && s->dtype != DType::BF16) {
      fail(*s->file + ": tensor '" + s->name + "' must be F8_E8M0, F32 or BF16, is " + std::string(dtype_name(s->dtype)));
      return e;
    }
    e = {t->dtype, t->data, rows, dim, s->dtype, s->data, s->shape[1]};
    count(*t, 1);
    count(*s, 0);
    return e;
  }

  V41BlockWeights block(int l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    const int64_t d = c_.hidden_size, H = c_.num_attention_heads, hd = c_.head_dim, hc = c_.hc_mult;
    V41BlockWeights B;
    B.attn_norm = floats(p + "attn_norm.weight", {d});
    B.ffn_norm = floats(p + "ffn_norm.weight", {d});
    B.hc_attn = hc_weights(p + "hc_attn");
    B.hc_ffn = hc_weights(p + "hc_ffn");
    V41AttentionWeights& a = B.attn;
    a.compress_ratio = c_.compress_ratio(l);
    a.kv_source = c_.is_kv_source(l);
    a.index_source = c_.is_index_source(l);
    a.wq_a = linear(p + "attn.wq_a", c_.q_lora_rank, d);
    a.q_norm = floats(p + "attn.q_norm.weight", {c_.q_lora_rank});
    a.wq_b = linear(p + "attn.wq_b", H * hd, c_.q_lora_rank);
    a.wkv = linear(p + "attn.wkv", hd, d);
    a.kv_norm = floats(p + "attn.kv_norm.weight", {hd});
    const int64_t G = c_.o_groups, o_lora = c_.o_lora_rank, group_in = H * hd / G;
    const LinearWeight wo_a = linear(p + "attn.wo_a", G * o_lora, group_in);
    for (int64_t g = 0; g < G && status().ok(); ++g) {  // rows g * o_lora_rank .. of wo_a: head group g
      LinearWeight part = wo_a;
      part.n_out = o_lora;
      part.data = static_cast<const uint8_t*>(wo_a.data) + size_t(g * o_lora * group_in) * dtype_size(wo_a.dtype);
      if (wo_a.scale_inv)
        part.scale_inv = wo_a.scale_inv + (g * o_lora / wo_a.block_rows) * ((group_in + wo_a.block_cols - 1) / wo_a.block_cols);
      a.wo_a.push_back(part);
    }
    a.wo_b = linear(p + "attn.wo_b", d, G * o_lora);
    a.sink = floats(p + "attn.attn_sink", {H});
    if (a.kv_source) {
      CompressorWeights& cw = a.compressor;
      cw.ratio = a.compress_ratio;
      cw.dim = int(hd);
      cw.wkv = linear(p + "attn.compressor.wkv", hd, d);
      if (cw.ratio > 1) cw.wgate = linear(p + "attn.compressor.wgate", hd, d);
      cw.norm = floats(p + "attn.compressor.norm.weight", {hd});
      a.index_wk = linear(p + "attn.indexer.wk", c_.index_head_dim, hd);
      a.index_k_norm = floats(p + "attn.indexer.k_norm.weight", {c_.index_head_dim});
    }
    if (a.index_source) {
      IndexerWeights& ix = a.indexer;
      ix.n_heads = c_.index_n_heads;
      ix.head_dim = c_.index_head_dim;
      ix.topk = c_.index_topk;
      ix.wq_b = linear(p + "attn.indexer.wq_b", int64_t(c_.index_n_heads) * c_.index_head_dim, c_.q_lora_rank);
      ix.weights_proj = linear(p + "attn.indexer.weights_proj", c_.index_n_heads, d);
    }
    const int ei = c_.engram_index(l);
    B.has_engram = ei >= 0;
    if (B.has_engram) {
      const int64_t n_in = int64_t(c_.engram_max_ngram_size - 1) * c_.engram_n_heads * c_.engram_head_dim;
      V41EngramWeights& e = B.engram;
      e.embed = engram_table(p + "engram.embed", c_.engram_num_embeddings[size_t(ei)], c_.engram_head_dim);
      e.wkv = linear(p + "engram.wkv", (hc + 1) * d, n_in);
      e.q_weight = floats(p + "engram.q_weight", {hc, d});
      e.k_weight = floats(p + "engram.k_weight", {hc, d});
    }
    const int E = c_.n_routed_experts;
    B.gate = linear(p + "ffn.gate", E, d);
    B.router.n_experts = E;
    B.router.top_k = c_.num_experts_per_tok;
    B.router.routed_scaling_factor = float(c_.routed_scaling_factor);
    B.router.gate_temp = float(c_.gate_temp);
    B.router.bias = floats(p + "ffn.gate.bias", {E});
    floats(p + "ffn.gate.bias_vl", {E});
    const int64_t inter = c_.moe_intermediate_size;
    for (int e = 0; e < E && status().ok(); ++e) {
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
  const DeepseekV41Config& c_;
};

bool set_aside(const std::string& name) {
  return name.starts_with("mtp.") || name.starts_with("vision.") || name.starts_with("aligner.") ||
         name.starts_with("image_");
}

}  // namespace

void EngramTable::row(int64_t r, float* out) const {
  DI_CHECK(r >= 0 && r < rows);
  const size_t es = dtype_size(dtype), ss = dtype_size(scale_dtype);
  const int64_t block = dim / n_scale_cols;
  for (int64_t j = 0; j < dim; ++j)
    out[j] = load_scalar(dtype, data + size_t(r * dim + j) * es) *
             load_scalar(scale_dtype, scale + size_t(r * n_scale_cols + j / block) * ss);
}

Result<std::unique_ptr<DeepseekV41Weights>> DeepseekV41Weights::Bind(const Checkpoint& ckpt, const DeepseekV41Config& c,
                                                                     const std::string& model_dir) {
  auto w = std::make_unique<DeepseekV41Weights>();
  V41WeightBinder b(ckpt, c, model_dir, w->owned_, *w);
  const int64_t d = c.hidden_size;
  w->embed = b.linear("embed", c.vocab_size, d);
  for (int l = 0; l < c.num_hidden_layers && b.status().ok(); ++l) w->layers.push_back(b.block(l));
  w->norm = b.floats("norm.weight", {d});
  w->head = c.tie_word_embeddings ? w->embed : b.linear("head", c.vocab_size, d);
  if (!b.status().ok()) return b.status();
  if (w->embed.dtype == DType::F8_E4M3)
    return Status::Error(model_dir + ": tensor 'embed.weight' must not be F8_E4M3 (rows are looked up)");
  for (const auto& [name, t] : ckpt.tensors()) w->n_set_aside += set_aside(name) ? 1 : 0;
  return w;
}

}  // namespace deepinfer
