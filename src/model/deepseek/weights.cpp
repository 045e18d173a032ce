#include "model/deepseek/weights.h"

#include <cstring>

#include "model/fp4_weight.h"
#include "model/fp8_requantize.h"
#include "model/weight_pages.h"

namespace deepinfer {
namespace {
bool is_compute_dtype(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::F8_E4M3;
}
}  // namespace

class WeightBinder {
 public:
  WeightBinder(const Checkpoint& ckpt, const ModelConfig& c, const std::string& dir, DeepseekWeights& w)
      : ckpt_(ckpt), c_(c), dir_(dir), w_(w) {}

  const Status& status() const { return status_; }

  // `name` [n_out, n_in] in F32, F16, BF16 or F8_E4M3 (with `name`_scale_inv); with fp4_ok also
  // packed FP4: I8 [n_out, n_in / 2] with the F8_E8M0 scales `prefix`.scale (model/fp4_weight.h).
  LinearWeight linear(const std::string& name, int64_t n_out, int64_t n_in, bool fp4_ok = false) {
    LinearWeight lw;
    const TensorView* packed = status_.ok() && fp4_ok ? ckpt_.find(name) : nullptr;
    if (packed && packed->dtype == DType::I8 && name.ends_with(".weight")) {
      Result<LinearWeight> fp4 = bind_fp4_weight(ckpt_, dir_, name.substr(0, name.size() - 7), *packed, n_out, n_in);
      if (!fp4.ok()) {
        fail(fp4.status().message());
        return lw;
      }
      w_.n_params += size_t(n_out * n_in);
      w_.n_bytes += fp4_weight_bytes(*fp4);
      return *fp4;
    }
    const TensorView* t = get(name, {n_out, n_in});
    if (!t) return lw;
    if (!is_compute_dtype(t->dtype)) {
      fail(*t->file + ": tensor '" + name + "' must be F32, F16, BF16 or F8_E4M3, is " + std::string(dtype_name(t->dtype)));
      return lw;
    }
    lw.n_out = n_out;
    lw.n_in = n_in;
    lw.dtype = t->dtype;
    lw.data = aligned(*t);
    if (t->dtype == DType::F8_E4M3) {
      if (!c_.fp8.enabled) {
        fail(*t->file + ": tensor '" + name + "' is F8_E4M3 but config.json has no fp8 quantization_config");
        return lw;
      }
      lw.block_rows = c_.fp8.block_rows;
      lw.block_cols = c_.fp8.block_cols;
      const int64_t rows = (n_out + lw.block_rows - 1) / lw.block_rows, cols = (n_in + lw.block_cols - 1) / lw.block_cols;
      const TensorView* s = get(name + "_scale_inv", {rows, cols});
      if (!s) return lw;
      if (s->dtype != DType::F32) {
        fail(*s->file + ": tensor '" + s->name + "' must be F32, is " + std::string(dtype_name(s->dtype)));
        return lw;
      }
      lw.scale_inv = static_cast<const float*>(aligned(*s));
      count(*s);
    }
    count(*t);
    return lw;
  }

  std::vector<float> vec(const std::string& name, int64_t n) {
    const TensorView* t = get(name, {n});
    if (!t) return {};
    if (!is_compute_dtype(t->dtype) || t->dtype == DType::F8_E4M3) {
      fail(*t->file + ": tensor '" + name + "' must be F32, F16 or BF16, is " + std::string(dtype_name(t->dtype)));
      return {};
    }
    std::vector<float> out(static_cast<size_t>(n));
    LinearWeight as_row{t->dtype, aligned(*t), 1, n, nullptr, 128, 128};
    for (int64_t i = 0; i < n; ++i) out[size_t(i)] = element(as_row, i);
    count(*t);
    return out;
  }

  MlpWeights mlp(const std::string& prefix, int64_t hidden, int64_t inter) {
    MlpWeights m;
    m.gate = linear(prefix + "gate_proj.weight", inter, hidden, true);
    m.up = linear(prefix + "up_proj.weight", inter, hidden, true);
    m.down = linear(prefix + "down_proj.weight", hidden, inter, true);
    return m;
  }

  void fail(const std::string& message) {
    if (status_.ok()) status_ = Status::Error(message);
  }

 private:
  const TensorView* get(const std::string& name, const std::vector<int64_t>& shape) {
    if (!status_.ok()) return nullptr;
    const TensorView* t = ckpt_.find(name);
    if (!t) {
      fail(dir_ + ": tensor '" + name + "' is missing from the checkpoint");
      return nullptr;
    }
    if (t->shape != shape) {
      TensorView want;
      want.shape = shape;
      fail(*t->file + ": tensor '" + name + "' has shape " + t->shape_str() + ", expected " + want.shape_str() +
           " from config.json");
      return nullptr;
    }
    return t;
  }

  // Kernels read elements with natural alignment; the format does not promise it.
  const void* aligned(const TensorView& t) {
    if (reinterpret_cast<uintptr_t>(t.data) % dtype_size(t.dtype) == 0) return t.data;
    auto& copy = w_.realigned_.emplace_back(t.data, t.data + t.n_bytes);
    return copy.data();
  }

  static float element(const LinearWeight& w, int64_t i) {
    switch (w.dtype) {
      case DType::F32: return static_cast<const float*>(w.data)[i];
      case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(w.data)[i]);
      case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(w.data)[i]);
      default: return 0.0f;
    }
  }

  void count(const TensorView& t) {
    if (t.dtype != DType::F32 || t.name.find("_scale_inv") == std::string::npos) w_.n_params += size_t(t.numel());
    w_.n_bytes += t.n_bytes;
  }

  const Checkpoint& ckpt_;
  const ModelConfig& c_;
  const std::string& dir_;
  DeepseekWeights& w_;
  Status status_;
};

Result<std::unique_ptr<DeepseekWeights>> DeepseekWeights::Bind(const Checkpoint& ckpt, const ModelConfig& c,
                                                               const std::string& model_dir,
                                                               const ExpertPlacement* placement, bool bind_mtp) {
  auto w = std::make_unique<DeepseekWeights>();
  WeightBinder b(ckpt, c, model_dir, *w);
  const int64_t d = c.hidden_size, H = c.num_attention_heads;
  w->embed = b.linear("model.embed_tokens.weight", c.vocab_size, d);
  // Layer i's decoder weights into L.
  auto bind_layer = [&](int i, LayerWeights& L) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    L.input_norm = b.vec(p + "input_layernorm.weight", d);
    L.post_attn_norm = b.vec(p + "post_attention_layernorm.weight", d);
    MlaWeights& a = L.attn;
    if (c.q_lora_rank > 0) {
      a.q_a_proj = b.linear(p + "self_attn.q_a_proj.weight", c.q_lora_rank, d, true);
      a.q_a_norm = b.vec(p + "self_attn.q_a_layernorm.weight", c.q_lora_rank);
      a.q_b_proj = b.linear(p + "self_attn.q_b_proj.weight", H * c.qk_head_dim(), c.q_lora_rank, true);
    } else {
      a.q_proj = b.linear(p + "self_attn.q_proj.weight", H * c.qk_head_dim(), d, true);
    }
    a.kv_a_proj = b.linear(p + "self_attn.kv_a_proj_with_mqa.weight", c.kv_lora_rank + c.qk_rope_head_dim, d, true);
    a.kv_a_norm = b.vec(p + "self_attn.kv_a_layernorm.weight", c.kv_lora_rank);
    a.kv_b_proj = b.linear(p + "self_attn.kv_b_proj.weight", H * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank);
    a.o_proj = b.linear(p + "self_attn.o_proj.weight", d, H * c.v_head_dim, true);

    L.is_moe = c.is_moe_layer(i);
    if (!L.is_moe) {
      L.mlp = b.mlp(p + "mlp.", d, c.intermediate_size);
      return;
    }
    MoeWeights& m = L.moe;
    m.router = b.linear(p + "mlp.gate.weight", c.n_routed_experts, d);
    if (c.topk_method == TopkMethod::kNoauxTc)
      m.router_bias = b.vec(p + "mlp.gate.e_score_correction_bias", c.n_routed_experts);
    for (int e = 0; e < c.n_routed_experts && b.status().ok(); ++e)
      m.experts.push_back(placement && !placement->holds(e)
                              ? MlpWeights{}
                              : b.mlp(p + "mlp.experts." + std::to_string(e) + ".", d, c.moe_intermediate_size));
    m.has_shared = c.n_shared_experts > 0;
    if (m.has_shared) m.shared = b.mlp(p + "mlp.shared_experts.", d, int64_t(c.n_shared_experts) * c.moe_intermediate_size);
  };
  for (int i = 0; i < c.num_hidden_layers && b.status().ok(); ++i) bind_layer(i, w->layers.emplace_back());
  w->final_norm = b.vec("model.norm.weight", d);
  if (c.tie_word_embeddings) w->lm_head = w->embed;
  else w->lm_head = b.linear("lm_head.weight", c.vocab_size, d, true);
  if (bind_mtp && b.status().ok()) {
    if (c.num_nextn_predict_layers < 1)
      return Status::Error(model_dir + ": config.json says num_nextn_predict_layers " +
                           std::to_string(c.num_nextn_predict_layers) + ": the checkpoint has no MTP layer");
    w->mtp = std::make_unique<MtpLayerWeights>();
    MtpLayerWeights& m = *w->mtp;
    const std::string p = "model.layers." + std::to_string(c.num_hidden_layers) + ".";
    m.enorm = b.vec(p + "enorm.weight", d);
    m.hnorm = b.vec(p + "hnorm.weight", d);
    m.eh_proj = b.linear(p + "eh_proj.weight", d, 2 * d, true);
    bind_layer(c.num_hidden_layers, m.block);
    m.head_norm = b.vec(p + "shared_head.norm.weight", d);
    m.head = b.linear(p + "shared_head.head.weight", c.vocab_size, d, true);
  }
  if (!b.status().ok()) return b.status();
  return w;
}

Result<std::vector<int32_t>> DeepseekWeights::rebind_experts(const Checkpoint& ckpt, const ModelConfig& c,
                                                             const std::string& model_dir, int layer,
                                                             std::span<const int32_t> held,
                                                             std::vector<MlpWeights>& dropped) {
  MoeWeights& m = layers[size_t(layer)].moe;
  DType up_act = DType::F32, down_act = DType::F32;
  const MlpWeights* like = m.has_shared ? &m.shared : nullptr;
  for (const MlpWeights& e : m.experts)
    if (!like && e.gate.data) like = &e;
  if (like) up_act = like->gate.act_dtype, down_act = like->down.act_dtype;
  WeightBinder b(ckpt, c, model_dir, *this);
  const std::string p = "model.layers." + std::to_string(layer) + ".mlp.experts.";
  std::vector<int32_t> bound;
  std::vector<MlpWeights> next(m.experts.size());
  for (const int32_t e : held) {
    if (m.experts[size_t(e)].gate.data) {
      next[size_t(e)] = m.experts[size_t(e)];
      continue;
    }
    next[size_t(e)] = b.mlp(p + std::to_string(e) + ".", c.hidden_size, c.moe_intermediate_size);
    if (!b.status().ok()) return b.status();
    next[size_t(e)].gate.act_dtype = next[size_t(e)].up.act_dtype = up_act;
    next[size_t(e)].down.act_dtype = down_act;
    bound.push_back(e);
  }
  for (size_t e = 0; e < m.experts.size(); ++e) {
    if (!m.experts[e].gate.data || next[e].gate.data) continue;
    MlpWeights mapped = m.experts[e];  // its relaid weights' copies are freed, not released as pages
    for (LinearWeight* w : {&mapped.gate, &mapped.up, &mapped.down})
      if (w->tile_major) *w = LinearWeight{};
    dropped.push_back(mapped);
    if (size_t(layer) < relaid_experts_.size()) relaid_experts_[size_t(layer)][e].clear();
  }
  m.experts = std::move(next);
  if (relay_backend_ != nullptr)
    for (const int32_t e : bound)
      for (LinearWeight* w : {&m.experts[size_t(e)].gate, &m.experts[size_t(e)].up, &m.experts[size_t(e)].down})
        relay_into(*relay_backend_, *w, relaid_experts_[size_t(layer)][size_t(e)]);
  return bound;
}

void DeepseekWeights::use_bf16_activations() {
  auto set = [](LinearWeight& w) {
    if (w.data && admits_bf16_activations(w)) w.act_dtype = DType::BF16;
  };
  // An MLP, or all of a layer's experts, switch together (the kernels take one setting per
  // call), and only when every one of their weights admits bf16 activations.
  auto all_bf16 = [](const MlpWeights& m) {
    return admits_bf16_activations(m.gate) && admits_bf16_activations(m.up) && admits_bf16_activations(m.down);
  };
  auto set_mlp = [&](MlpWeights& m) {
    set(m.gate);
    set(m.up);
    set(m.down);
  };
  auto set_layer = [&](LayerWeights& L) {
    MlaWeights& a = L.attn;
    for (LinearWeight* w : {&a.q_proj, &a.q_a_proj, &a.q_b_proj, &a.kv_a_proj, &a.o_proj}) set(*w);
    if (!L.is_moe) {
      if (all_bf16(L.mlp)) set_mlp(L.mlp);
      return;
    }
    MoeWeights& m = L.moe;
    bool all = !m.has_shared || all_bf16(m.shared);
    for (const MlpWeights& e : m.experts) all = all && all_bf16(e);
    if (!all) return;
    for (MlpWeights& e : m.experts) set_mlp(e);
    if (m.has_shared) set_mlp(m.shared);
  };
  for (LayerWeights& L : layers) set_layer(L);
  set(lm_head);
  if (mtp) {
    set_layer(mtp->block);
    set(mtp->eh_proj);
    set(mtp->head);
  }
}

Result<bool> DeepseekWeights::requantize_lm_head(const std::string& model_dir, DType to) {
  const bool tied = lm_head.data == embed.data;
  return deepinfer::requantize_lm_head(lm_head, to, tied, model_dir, tied ? "model.embed_tokens.weight" : "lm_head.weight",
                            requantized_lm_head_);
}

size_t DeepseekWeights::relay(Backend& backend) {
  relay_backend_ = &backend;
  size_t bytes = 0;
  auto relay_one = [&](LinearWeight& w, std::deque<UninitBytes>& store) {
    bytes += relay_into(backend, w, store, w.data == embed.data);
  };
  auto relay_mlp = [&](MlpWeights& m, std::deque<UninitBytes>& store) {
    for (LinearWeight* w : {&m.gate, &m.up, &m.down}) relay_one(*w, store);
  };
  // experts: each routed expert's store (rebind_experts frees and fills them), or none (relaid_).
  auto relay_layer = [&](LayerWeights& L, std::vector<std::deque<UninitBytes>>* experts) {
    MlaWeights& a = L.attn;
    for (LinearWeight* w : {&a.q_proj, &a.q_a_proj, &a.q_b_proj, &a.kv_a_proj, &a.o_proj}) relay_one(*w, relaid_);
    if (!L.is_moe) return relay_mlp(L.mlp, relaid_);
    for (size_t e = 0; e < L.moe.experts.size(); ++e) relay_mlp(L.moe.experts[e], experts ? (*experts)[e] : relaid_);
    if (L.moe.has_shared) relay_mlp(L.moe.shared, relaid_);
  };
  relaid_experts_.resize(layers.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    relaid_experts_[l].resize(layers[l].moe.experts.size());
    relay_layer(layers[l], &relaid_experts_[l]);
  }
  relay_one(lm_head, relaid_);
  if (mtp) {
    relay_layer(mtp->block, nullptr);
    relay_one(mtp->eh_proj, relaid_);
    relay_one(mtp->head, relaid_);
  }
  return bytes;
}

}  // namespace deepinfer
