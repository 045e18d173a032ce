#include "model/deepseek_v41/weights.h"

#include <cstring>

#include "core/check.h"
#include "model/deepseek_v4/layer_binder.h"
#include "model/fp8_requantize.h"
#include "model/weight_pages.h"

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

class V41WeightBinder : public V4LayerBinder {
 public:
  V41WeightBinder(const Checkpoint& ckpt, const DeepseekV41Config& c, const std::string& dir,
                  std::deque<std::vector<uint8_t>>& owned, DeepseekV41Weights& w)
      : V4LayerBinder(ckpt, dir, c, owned, w.n_params, w.n_bytes), c_(c) {}

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

  V41BlockWeights block(int l, const ExpertPlacement* placement) {
    const std::string p = "layers." + std::to_string(l) + ".";
    const int64_t d = c_.hidden_size, hd = c_.head_dim, hc_mult = c_.hc_mult;
    V41BlockWeights B;
    B.attn_norm = floats(p + "attn_norm.weight", {d});
    B.ffn_norm = floats(p + "ffn_norm.weight", {d});
    B.hc_attn = hc(p + "hc_attn", (2 + hc_mult) * hc_mult, 3);
    B.hc_ffn = hc(p + "hc_ffn", (2 + hc_mult) * hc_mult, 3);
    V41AttentionWeights& a = B.attn;
    a.compress_ratio = c_.compress_ratio(l);
    a.kv_source = c_.is_kv_source(l);
    a.index_source = c_.is_index_source(l);
    attention_projections(p, a);
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
    if (a.index_source) indexer_query(p, a.indexer);
    const int ei = c_.engram_index(l);
    B.has_engram = ei >= 0;
    if (B.has_engram) {
      const int64_t n_in = int64_t(c_.engram_max_ngram_size - 1) * c_.engram_n_heads * c_.engram_head_dim;
      V41EngramWeights& e = B.engram;
      e.embed = engram_table(p + "engram.embed", c_.engram_num_embeddings[size_t(ei)], c_.engram_head_dim);
      e.wkv = linear(p + "engram.wkv", (hc_mult + 1) * d, n_in);
      e.q_weight = floats(p + "engram.q_weight", {hc_mult, d});
      e.k_weight = floats(p + "engram.k_weight", {hc_mult, d});
    }
    const int E = c_.n_routed_experts;
    B.gate = linear(p + "ffn.gate", E, d);
    B.router = router();
    B.router.gate_temp = float(c_.gate_temp);
    B.router.bias = floats(p + "ffn.gate.bias", {E});
    floats(p + "ffn.gate.bias_vl", {E});
    B.experts = routed_experts(p, placement);
    B.has_shared = c_.n_shared_experts > 0;
    if (B.has_shared) B.shared = shared_experts(p);
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
                                                                     const std::string& model_dir,
                                                                     const ExpertPlacement* placement) {
  auto w = std::make_unique<DeepseekV41Weights>();
  V41WeightBinder b(ckpt, c, model_dir, w->owned_, *w);
  const int64_t d = c.hidden_size;
  w->embed = b.linear("embed", c.vocab_size, d);
  for (int l = 0; l < c.num_hidden_layers && b.status().ok(); ++l) w->layers.push_back(b.block(l, placement));
  w->norm = b.floats("norm.weight", {d});
  w->head = c.tie_word_embeddings ? w->embed : b.linear("head", c.vocab_size, d);
  if (!b.status().ok()) return b.status();
  if (w->embed.dtype == DType::F8_E4M3)
    return Status::Error(model_dir + ": tensor 'embed.weight' must not be F8_E4M3 (rows are looked up)");
  for (const auto& [name, t] : ckpt.tensors()) w->n_set_aside += set_aside(name) ? 1 : 0;
  return w;
}

Result<bool> DeepseekV41Weights::requantize_head(const std::string& model_dir, DType to) {
  const bool tied = head.data == embed.data;
  return requantize_lm_head(head, to, tied, model_dir, tied ? "embed.weight" : "head.weight", requantized_head_);
}

void DeepseekV41Weights::for_each_projection(const std::function<void(LinearWeight&)>& f) {
  for (V41BlockWeights& B : layers) {
    V41AttentionWeights& a = B.attn;
    for (LinearWeight* w : {&a.wq_a, &a.wq_b, &a.wkv, &a.wo_b, &a.compressor.wkv, &a.compressor.wgate, &a.index_wk,
                            &a.indexer.wq_b, &a.indexer.weights_proj})
      f(*w);
    for (LinearWeight& w : a.wo_a) f(w);
    if (B.has_engram) f(B.engram.wkv);
    const auto expert = [&](ExpertWeights& e) {
      for (LinearWeight* w : {&e.w1, &e.w3, &e.w2}) f(*w);
    };
    for (ExpertWeights& e : B.experts) expert(e);
    if (B.has_shared) expert(B.shared);
  }
  f(head);
}

void DeepseekV41Weights::use_bf16_activations() {
  for_each_projection([](LinearWeight& w) { deepinfer::use_bf16_activations(w); });
}

size_t DeepseekV41Weights::relay(Backend& backend) {
  size_t bytes = 0;
  for_each_projection([&](LinearWeight& w) { bytes += relay_into(backend, w, relaid_); });
  return bytes;
}

}  // namespace deepinfer
