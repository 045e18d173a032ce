#include "model/deepseek_v4/weights.h"

#include <cstring>
#include <functional>

#include "model/deepseek_v4/layer_binder.h"
#include "model/fp8_requantize.h"
#include "model/weight_pages.h"

namespace deepinfer {

class V4WeightBinder : public V4LayerBinder {
 public:
  V4WeightBinder(const Checkpoint& ckpt, const DeepseekV4Config& c, const std::string& dir, DeepseekV4Weights& w)
      : V4LayerBinder(ckpt, dir, c, w.owned_, w.n_params, w.n_bytes), c_(c) {}

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

  V4BlockWeights block(const std::string& p, int ratio, bool hashed, const ExpertPlacement* placement = nullptr) {
    const int64_t d = c_.hidden_size, hd = c_.head_dim, n_hc = c_.hc_mult;
    V4BlockWeights B;
    B.attn_norm = floats(p + "attn_norm.weight", {d});
    B.ffn_norm = floats(p + "ffn_norm.weight", {d});
    B.hc_attn = hc(p + "hc_attn", (2 + n_hc) * n_hc, 3);
    B.hc_ffn = hc(p + "hc_ffn", (2 + n_hc) * n_hc, 3);
    V4AttentionWeights& a = B.attn;
    a.compress_ratio = ratio;
    attention_projections(p, a);
    if (ratio > 0) a.compressor = compressor(p + "attn.compressor.", ratio, int(hd));
    if (ratio == 4) {
      indexer_query(p, a.indexer);
      a.indexer.compressor = compressor(p + "attn.indexer.compressor.", 4, c_.index_head_dim);
    }
    B.gate = linear(p + "ffn.gate", c_.n_routed_experts, d);
    B.router = router();
    if (hashed) B.router.tid2eid = tid2eid(p + "ffn.gate.tid2eid");
    else B.router.bias = floats(p + "ffn.gate.bias", {c_.n_routed_experts});
    B.experts = routed_experts(p, placement);
    B.has_shared = c_.n_shared_experts > 0;
    if (B.has_shared) B.shared = shared_experts(p);
    return B;
  }

 private:
  const DeepseekV4Config& c_;
};

Result<std::unique_ptr<DeepseekV4Weights>> DeepseekV4Weights::Bind(const Checkpoint& ckpt, const DeepseekV4Config& c,
                                                                   const std::string& model_dir,
                                                                   const ExpertPlacement* placement) {
  auto w = std::make_unique<DeepseekV4Weights>();
  V4WeightBinder b(ckpt, c, model_dir, *w);
  const int64_t d = c.hidden_size;
  w->embed = b.linear("embed", c.vocab_size, d);
  for (int i = 0; i < c.num_hidden_layers && b.status().ok(); ++i)
    w->layers.push_back(
        b.block("layers." + std::to_string(i) + ".", c.compress_ratio(i), c.is_hash_layer(i), placement));
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

void DeepseekV4Weights::for_each_projection(const std::function<void(LinearWeight&)>& f) {
  for (V4BlockWeights& B : layers) {
    V4AttentionWeights& a = B.attn;
    for (LinearWeight* w : {&a.wq_a, &a.wq_b, &a.wkv, &a.wo_b, &a.compressor.wkv, &a.compressor.wgate, &a.indexer.wq_b,
                            &a.indexer.weights_proj, &a.indexer.compressor.wkv, &a.indexer.compressor.wgate})
      f(*w);
    for (LinearWeight& w : a.wo_a) f(w);
    const auto expert = [&](ExpertWeights& e) {
      for (LinearWeight* w : {&e.w1, &e.w3, &e.w2}) f(*w);
    };
    for (ExpertWeights& e : B.experts) expert(e);
    expert(B.shared);
  }
  f(head);
}

void DeepseekV4Weights::use_bf16_activations() {
  for_each_projection([](LinearWeight& w) { deepinfer::use_bf16_activations(w); });
}

size_t DeepseekV4Weights::relay(Backend& backend) {
  size_t bytes = 0;
  for_each_projection([&](LinearWeight& w) { bytes += relay_into(backend, w, relaid_); });
  return bytes;
}

Result<bool> DeepseekV4Weights::requantize_head(const std::string& model_dir, DType to) {
  const bool tied = head.data == embed.data;
  return requantize_lm_head(head, to, tied, model_dir, tied ? "embed.weight" : "head.weight", requantized_head_);
}

}  // namespace deepinfer
