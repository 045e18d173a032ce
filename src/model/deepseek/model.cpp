#include "model/deepseek/model.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "core/check.h"
#include "model/deepseek/router.h"
#include "model/weight_pages.h"
#include "model/scratch.h"

namespace deepinfer {
namespace {

void add_into(float* x, const float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] += y[i];
}

// An expert's pages, when it is bound (prefault) or moved to another rank (release).
void prefault(const MlpWeights& m) {
  prefault_pages(m.gate);
  prefault_pages(m.up);
  prefault_pages(m.down);
}

void release(const MlpWeights& m) {
  release_pages(m.gate);
  release_pages(m.up);
  release_pages(m.down);
}

}  // namespace

Result<std::unique_ptr<DeepseekModel>> DeepseekModel::Load(const std::string& model_dir, const ModelOptions& options,
                                                           Backend& backend) {
  DI_ASSIGN_OR_RETURN(ModelConfig config, ModelConfig::Load(model_dir));
  DI_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(model_dir));
  std::optional<ExpertPlacement> placement;
  if (ExpertGroup* group = options.expert_group) {
    if (config.n_routed_experts == 0) return Status::Error("expert parallelism needs a model with routed experts");
    if (options.eplb.redundant_experts > 0) {  // the copies go to the first experts until loads are known
      const std::vector<int64_t> no_load(size_t(config.n_routed_experts), 0);
      DI_ASSIGN_OR_RETURN(EplbPlacement slots, eplb_placement(no_load, config.n_routed_experts + options.eplb.redundant_experts,
                                                              group->size(), 1, 1));
      DI_ASSIGN_OR_RETURN(ExpertPlacement p, ExpertPlacement::from_slots(config.n_routed_experts, group->size(), group->rank(),
                                                                         std::move(slots.slot_expert), std::move(slots.slot_rank)));
      placement = std::move(p);
    } else {
      DI_ASSIGN_OR_RETURN(ExpertPlacement p, ExpertPlacement::contiguous(config.n_routed_experts, group->size(), group->rank()));
      placement = std::move(p);
    }
  }
  if (options.mtp_drafting && placement)
    return Status::Error("MTP drafting (--speculative mtp) does not run with expert parallelism");
  DI_ASSIGN_OR_RETURN(auto weights, DeepseekWeights::Bind(ckpt, config, model_dir, placement ? &*placement : nullptr,
                                                          options.mtp_drafting));
  if (options.activation_dtype != DType::F32 && options.activation_dtype != DType::BF16)
    return Status::Error("activation dtype must be f32 or bf16");
  bool requantized = false;
  if (options.lm_head_dtype) {
    DI_ASSIGN_OR_RETURN(requantized, weights->requantize_lm_head(model_dir, *options.lm_head_dtype));
  }
  if (options.activation_dtype == DType::BF16) weights->use_bf16_activations();
  const size_t relaid = options.relay_weights ? weights->relay(backend) : 0;
  std::unique_ptr<DeepseekModel> model(
      new DeepseekModel(std::move(config), std::move(ckpt), std::move(weights), options, backend));
  if (requantized) model->info_.lm_head_requantized = options.lm_head_dtype;
  model->info_.n_relaid_bytes = relaid;
  if (placement) {
    std::vector<int32_t> moe_layers;
    for (int l = 0; l < model->config_.num_hidden_layers; ++l)
      if (model->weights_->layers[size_t(l)].is_moe) moe_layers.push_back(l);
    model->ep_ = std::make_unique<ExpertParallelMoe>(*options.expert_group, std::move(moe_layers), *placement, options.eplb,
                                                     std::max(1, model->config_.n_group), options.expert_load, backend,
                                                     options.expert_wire_dtype);
    model->model_dir_ = model_dir;
  }
  return model;
}

DeepseekModel::DeepseekModel(ModelConfig c, Checkpoint ckpt, std::unique_ptr<DeepseekWeights> w,
                             const ModelOptions& options, Backend& backend)
    : config_(std::move(c)), ckpt_(std::move(ckpt)), weights_(std::move(w)), backend_(backend),
      rope_(make_yarn_rope(config_)), prefill_attention_(options.prefill_attention) {
  info_.architecture = config_.architecture;
  info_.vocab_size = config_.vocab_size;
  info_.n_layers = config_.num_hidden_layers;
  info_.max_position_embeddings = config_.max_position_embeddings;
  info_.eos_token_ids = config_.eos_token_ids;
  info_.bos_token_id = config_.bos_token_id;
  info_.n_params = weights_->n_params;
  info_.n_weight_bytes = weights_->n_bytes;
  info_.activation_dtype = options.activation_dtype;
  info_.kv_formulation = options.prefill_attention == PrefillAttention::kExpanded ? "prompt rows expanded"
                                                                              : "every row absorbed";
  prefault_pages(weights_->embed);
  prefault_pages(weights_->lm_head);
  for (const LayerWeights& l : weights_->layers) {
    for (const LinearWeight* w : {&l.attn.q_proj, &l.attn.q_a_proj, &l.attn.q_b_proj, &l.attn.kv_a_proj,
                                  &l.attn.kv_b_proj, &l.attn.o_proj, &l.moe.router})
      prefault_pages(*w);
    prefault(l.mlp);
    for (const MlpWeights& e : l.moe.experts) prefault(e);
    prefault(l.moe.shared);
  }
}

Result<std::vector<KvKindSpec>> DeepseekModel::kv_kinds(DType cache_dtype, int block_size) const {
  if (cache_dtype != DType::F32 && cache_dtype != DType::BF16 && cache_dtype != DType::F8_E4M3)
    return Status::Error("the MLA latent cache is f32, bf16 or fp8, not " + std::string(dtype_name(cache_dtype)));
  KvKindSpec latent;
  latent.name = "latent";
  latent.n_slabs = config_.num_hidden_layers;
  latent.bytes_per_block = size_t(block_size) * cache_layout(cache_dtype).bytes_per_token();
  if (!can_draft()) return std::vector<KvKindSpec>{latent};
  KvKindSpec mtp_latent{"mtp_latent", 1, latent.bytes_per_block, 0};
  KvKindSpec mtp_hidden{"mtp_hidden", 1, size_t(block_size) * size_t(config_.hidden_size) * sizeof(float), 1};
  return std::vector<KvKindSpec>{latent, mtp_latent, mtp_hidden};
}

void DeepseekModel::forward(const ForwardBatch& b, const KvCacheView& kv, float* logits) {
  const ModelConfig& c = config_;
  const int64_t n = int64_t(b.n_rows()), d = c.hidden_size;
  DI_CHECK(kv.kinds.size() == (can_draft() ? 3u : 1u) && kv.kinds[0].slab_base.size() == size_t(c.num_hidden_layers));
  DI_CHECK(b.positions.size() == b.n_rows() && (b.prompt_rows.empty() || b.prompt_rows.size() == b.n_rows()));
  for (int64_t r = 0; r < n; ++r) {
    DI_CHECK(b.token_ids[size_t(r)] >= 0 && b.token_ids[size_t(r)] < c.vocab_size);
    DI_CHECK(b.positions[size_t(r)] >= 0 && b.positions[size_t(r)] < c.max_position_embeddings);
  }
  if (ep_) ep_->begin_forward([this](int layer, std::span<const int32_t> held) { return rebind_experts(layer, held); });
  if (n == 0) {  // an idle rank of an expert-parallel group still takes part in every MoE exchange
    if (ep_)
      for (int l = 0; l < c.num_hidden_layers; ++l)
        if (weights_->layers[size_t(l)].is_moe) moe(weights_->layers[size_t(l)].moe, nullptr, 0, nullptr);
    return;
  }

  float* x = sized(s_.x, size_t(n * d));
  float* h = sized(s_.h, size_t(n * d));
  float* tmp = sized(s_.tmp, size_t(n * d));
  backend_.embed({&weights_->embed, b.token_ids.data(), n, x});

  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const LayerWeights& L = weights_->layers[size_t(l)];
    backend_.rms_norm({x, d, h, d, n, d, L.input_norm.data(), float(c.rms_norm_eps)});
    attention(L.attn, b, kv.kinds[0].slab_base[size_t(l)], kv.dtype, kv.block_size, 0, h, tmp);
    add_into(x, tmp, size_t(n * d));
    backend_.rms_norm({x, d, h, d, n, d, L.post_attn_norm.data(), float(c.rms_norm_eps)});
    ffn(L, h, n, tmp);
    add_into(x, tmp, size_t(n * d));
  }
  if (can_draft()) mtp_store(b, kv, x);

  const int64_t n_out = int64_t(b.logit_rows.size());
  for (int64_t i = 0; i < n_out; ++i) {
    const int32_t row = b.logit_rows[size_t(i)];
    DI_CHECK(row >= 0 && row < n);
    backend_.rms_norm({x + row * d, d, h + i * d, d, 1, d, weights_->final_norm.data(), float(c.rms_norm_eps)});
  }
  backend_.linear({h, d, n_out, &weights_->lm_head, logits, c.vocab_size});
}

void DeepseekModel::attention(const MlaWeights& a, const ForwardBatch& b, uint8_t* cache, DType dtype,
                              int block_size, int kind, const float* h, float* out) {
  const ModelConfig& c = config_;
  const int64_t n = int64_t(b.n_rows()), d = c.hidden_size, H = c.num_attention_heads;
  const int64_t qk = c.qk_head_dim(), lat = c.kv_lora_rank, rd = c.qk_rope_head_dim;
  const float eps = float(c.rms_norm_eps);

  float* q = sized(s_.q, size_t(n * H * qk));
  if (c.q_lora_rank > 0) {
    float* q_a = sized(s_.q_a, size_t(n * c.q_lora_rank));
    backend_.linear({h, d, n, &a.q_a_proj, q_a, c.q_lora_rank});
    backend_.rms_norm({q_a, c.q_lora_rank, q_a, c.q_lora_rank, n, c.q_lora_rank, a.q_a_norm.data(), eps});
    backend_.linear({q_a, c.q_lora_rank, n, &a.q_b_proj, q, H * qk});
  } else {
    backend_.linear({h, d, n, &a.q_proj, q, H * qk});
  }
  float* kv_a = sized(s_.kv_a, size_t(n * (lat + rd)));
  backend_.linear({h, d, n, &a.kv_a_proj, kv_a, lat + rd});
  float* latent = sized(s_.latent, size_t(n * lat));
  backend_.rms_norm({kv_a, lat + rd, latent, lat, n, lat, a.kv_a_norm.data(), eps});

  const int32_t* pos = b.positions.data();
  backend_.rope({kv_a + lat, lat + rd, 0, n, 1, int(rd), pos, rope_.inv_freq.data(), rope_.cos_sin_scale});
  backend_.rope({q + c.qk_nope_head_dim, H * qk, qk, n, int(H), int(rd), pos, rope_.inv_freq.data(), rope_.cos_sin_scale});

  backend_.mla_kv_store({latent, lat, kv_a + lat, lat + rd, &b, cache, cache_layout(dtype), block_size, kind});

  float* o = sized(s_.o, size_t(n * H * c.v_head_dim));
  int64_t n_prompt = 0;
  if (prefill_attention_ == PrefillAttention::kExpanded)
    for (int64_t r = 0; r < n; ++r) n_prompt += b.is_prompt_row(size_t(r));
  if (n_prompt == 0) {
    absorbed_attention(a, b, cache, dtype, block_size, kind, q, o);
  } else if (n_prompt == n) {
    expanded_attention(a, b, cache, dtype, block_size, kind, q, o);
  } else {  // each part's rows gathered, computed as a batch of their own, and put back in place
    for (int part = 0; part < 2; ++part) {
      ForwardBatch& pb = s_.part[part];
      std::vector<int32_t>& rows = s_.part_rows[part];
      pb.token_ids.clear();
      pb.positions.clear();
      pb.seqs.clear();
      pb.prompt_rows.clear();
      rows.clear();
      for (const BatchSequence& sq : b.seqs) {
        int32_t n_seq_prompt = 0;  // a sequence's prompt rows come before its generated ones
        for (int32_t i = 0; i < sq.n_new; ++i) {
          const bool prompt = b.is_prompt_row(size_t(sq.row_begin + i));
          DI_CHECK_MSG(!prompt || i == n_seq_prompt, "a prompt row after a generated row of the same sequence");
          n_seq_prompt += prompt;
        }
        const int32_t first = part == 0 ? 0 : n_seq_prompt, count = part == 0 ? n_seq_prompt : sq.n_new - n_seq_prompt;
        if (count == 0) continue;
        BatchSequence ps = sq;
        ps.row_begin = int32_t(rows.size());
        ps.n_new = count;
        ps.n_ctx = sq.n_ctx - (sq.n_new - (first + count));
        pb.seqs.push_back(ps);
        for (int32_t i = first; i < first + count; ++i) {
          const int32_t r = sq.row_begin + i;
          rows.push_back(r);
          pb.token_ids.push_back(b.token_ids[size_t(r)]);
          pb.positions.push_back(b.positions[size_t(r)]);
          pb.prompt_rows.push_back(part == 0 ? 1 : 0);
        }
      }
      const int64_t m = int64_t(rows.size());
      float* pq = sized(s_.part_q, size_t(m * H * qk));
      float* po = sized(s_.part_o, size_t(m * H * c.v_head_dim));
      for (int64_t i = 0; i < m; ++i) std::copy_n(q + rows[size_t(i)] * H * qk, H * qk, pq + i * H * qk);
      if (part == 0) expanded_attention(a, pb, cache, dtype, block_size, kind, pq, po);
      else absorbed_attention(a, pb, cache, dtype, block_size, kind, pq, po);
      for (int64_t i = 0; i < m; ++i)
        std::copy_n(po + i * H * c.v_head_dim, H * c.v_head_dim, o + rows[size_t(i)] * H * c.v_head_dim);
    }
  }
  backend_.linear({o, H * c.v_head_dim, n, &a.o_proj, out, d});
}

void DeepseekModel::absorbed_attention(const MlaWeights& a, const ForwardBatch& b, const uint8_t* cache, DType dtype,
                                       int block_size, int kind, const float* q, float* o) {
  const ModelConfig& c = config_;
  const int64_t n = int64_t(b.n_rows()), H = c.num_attention_heads, qk = c.qk_head_dim(), lat = c.kv_lora_rank;
  float* q_latent = sized(s_.q_latent, size_t(n * H * lat));
  backend_.mla_absorb_query({q, H * qk, qk, n, &a.kv_b_proj, int(H), c.qk_nope_head_dim, c.v_head_dim, q_latent});
  float* o_latent = sized(s_.o_latent, size_t(n * H * lat));
  backend_.mla_attention({q_latent, q + c.qk_nope_head_dim, H * qk, qk, o_latent, int(H), rope_.softmax_scale, &b,
                          cache, cache_layout(dtype), block_size, kind, attention_dot_dtype(dtype)});
  backend_.mla_project_value({o_latent, n, &a.kv_b_proj, int(H), c.qk_nope_head_dim, c.v_head_dim, o});
}

void DeepseekModel::expanded_attention(const MlaWeights& a, const ForwardBatch& b, const uint8_t* cache, DType dtype,
                                       int block_size, int kind, const float* q, float* o) {
  const ModelConfig& c = config_;
  const int64_t H = c.num_attention_heads, qk = c.qk_head_dim();
  backend_.mla_expanded_attention({q, H * qk, qk, o, H * c.v_head_dim, &a.kv_b_proj, int(H), c.qk_nope_head_dim,
                                   c.v_head_dim, rope_.softmax_scale, &b, cache, cache_layout(dtype), block_size, kind,
                                   attention_dot_dtype(dtype)});
}

DType DeepseekModel::attention_dot_dtype(DType cache_dtype) const {
  return info_.activation_dtype == DType::BF16 && (cache_dtype == DType::BF16 || cache_dtype == DType::F8_E4M3)
             ? DType::BF16
             : DType::F32;
}

void DeepseekModel::ffn(const LayerWeights& L, const float* h, int64_t n, float* out) {
  if (L.is_moe) moe(L.moe, h, n, out);
  else dense_mlp(L.mlp, h, n, config_.intermediate_size, out);
}

void DeepseekModel::dense_mlp(const MlpWeights& w, const float* h, int64_t n, int64_t inter, float* out) {
  const int64_t d = config_.hidden_size;
  float* act = sized(s_.act, size_t(n * inter));
  backend_.swiglu({h, d, n, &w.gate, &w.up, act, inter});
  backend_.linear({act, inter, n, &w.down, out, d});
}

Status DeepseekModel::rebind_experts(int layer, std::span<const int32_t> held) {
  std::vector<MlpWeights> dropped;
  DI_ASSIGN_OR_RETURN(const std::vector<int32_t> bound,
                      weights_->rebind_experts(ckpt_, config_, model_dir_, layer, held, dropped));
  const MoeWeights& m = weights_->layers[size_t(layer)].moe;
  for (const int32_t e : bound) prefault(m.experts[size_t(e)]);
  for (const MlpWeights& e : dropped) release(e);
  return Status::Ok();
}

void DeepseekModel::moe(const MoeWeights& w, const float* h, int64_t n, float* out) {
  const ModelConfig& c = config_;
  const int64_t d = c.hidden_size, E = c.n_routed_experts, k = c.num_experts_per_tok;
  float* logits = sized(s_.router_logits, size_t(n * E));
  backend_.linear({h, d, n, &w.router, logits, E});
  int32_t* ids = sized(s_.expert_ids, size_t(n * k));
  float* weights = sized(s_.expert_weights, size_t(n * k));
  const float* bias = w.router_bias.empty() ? nullptr : w.router_bias.data();
  for (int64_t r = 0; r < n; ++r) route_token(c, logits + r * E, bias, ids + r * k, weights + r * k);

  s_.experts.resize(w.experts.size());  // this layer's expert weights
  for (size_t e = 0; e < w.experts.size(); ++e) s_.experts[e] = {&w.experts[e].gate, &w.experts[e].up, &w.experts[e].down};
  const MlpWeightRefs shared{&w.shared.gate, &w.shared.up, &w.shared.down};
  if (ep_) {  // the decoder's layers only (the MTP layer does not run expert-parallel)
    int layer = 0;
    while (&weights_->layers[size_t(layer)].moe != &w) ++layer;
    ep_->run(layer, h, d, n, d, int(k), ids, weights, s_.experts, w.has_shared ? &shared : nullptr, out, d);
    return;
  }
  backend_.moe({h, d, n, s_.experts.data(), int(E), int(k), ids, weights, w.has_shared ? &shared : nullptr, out, d});
}

}  // namespace deepinfer
