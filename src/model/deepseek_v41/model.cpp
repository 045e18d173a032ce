#include "model/deepseek_v41/model.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/check.h"
#include "model/deepseek/yarn_rope.h"
#include "model/scratch.h"

namespace deepinfer {
Result<std::unique_ptr<DeepseekV41Model>> DeepseekV41Model::Load(const std::string& model_dir,
                                                                 const ModelOptions& options, Backend& backend) {
  if (options.activation_dtype != DType::F32 && options.activation_dtype != DType::BF16)
    return Status::Error("activation dtype must be f32 or bf16");
  DI_ASSIGN_OR_RETURN(DeepseekV41Config config, DeepseekV41Config::Load(model_dir));
  DI_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(model_dir));
  std::optional<ExpertPlacement> placement;
  if (ExpertGroup* group = options.expert_group) {
    if (options.eplb.redundant_experts > 0 || options.eplb.interval > 0)
      return Status::Error("--expert-parallel: " + config.architecture +
                           " does not rebalance experts (EPLB) yet; run it without redundant experts and rebalancing");
    DI_ASSIGN_OR_RETURN(ExpertPlacement p, ExpertPlacement::contiguous(config.n_routed_experts, group->size(), group->rank()));
    placement = std::move(p);
  }
  DI_ASSIGN_OR_RETURN(auto weights, DeepseekV41Weights::Bind(ckpt, config, model_dir, placement ? &*placement : nullptr));
  bool requantized = false;
  if (options.lm_head_dtype) {
    DI_ASSIGN_OR_RETURN(requantized, weights->requantize_head(model_dir, *options.lm_head_dtype));
  }
  if (options.activation_dtype == DType::BF16) weights->use_bf16_activations();
  const size_t relaid = options.relay_weights ? weights->relay(backend) : 0;
  std::vector<int32_t> compressed;
  std::vector<EngramLayerHash> hashes;
  if (!config.engram_layer_ids.empty()) {
    std::vector<std::string> texts, raw;
    DI_RETURN_IF_ERROR(engram_token_texts(model_dir, config.vocab_size, texts, raw));
    int32_t n_compressed = 0;
    compressed = engram_compressed_ids(texts, raw, &n_compressed);
    if (n_compressed != config.engram_compressed_vocab_size)
      return Status::Error(model_dir + ": the tokenizer gives " + std::to_string(n_compressed) +
                           " Engram compressed ids, config.json says engram_compressed_vocab_size " +
                           std::to_string(config.engram_compressed_vocab_size));
    DI_ASSIGN_OR_RETURN(hashes, engram_layer_hashes(config.engram_layer_ids, config.engram_max_ngram_size,
                                                    config.engram_n_heads, config.engram_vocab_size, n_compressed));
    for (size_t i = 0; i < hashes.size(); ++i)
      if (hashes[i].n_rows != config.engram_num_embeddings[i])
        return Status::Error(model_dir + ": Engram layer " + std::to_string(config.engram_layer_ids[i]) + " hashes into " +
                             std::to_string(hashes[i].n_rows) + " rows, config.json says engram_num_embeddings " +
                             std::to_string(config.engram_num_embeddings[i]));
  }
  const size_t set_aside = weights->n_set_aside;
  auto model = std::unique_ptr<DeepseekV41Model>(
      new DeepseekV41Model(std::move(config), std::move(ckpt), std::move(weights), backend));
  model->compressed_ids_ = std::move(compressed);
  if (requantized) model->info_.lm_head_requantized = options.lm_head_dtype;
  model->info_.n_relaid_bytes = relaid;
  model->info_.activation_dtype = options.activation_dtype;
  model->engram_hashes_ = std::move(hashes);
  if (placement) {  // every layer is an MoE layer
    std::vector<int32_t> moe_layers(size_t(model->config_.num_hidden_layers));
    for (size_t l = 0; l < moe_layers.size(); ++l) moe_layers[l] = int32_t(l);
    model->ep_ = std::make_unique<ExpertParallelMoe>(*options.expert_group, std::move(moe_layers), *placement,
                                                     options.eplb, 1, options.expert_load, backend,
                                                     options.expert_wire_dtype);
  }
  const DeepseekV41Config& c = model->config_;
  model->load_note_ = std::string("DeepSeek-V4.1 runs text-only") +
                      (c.has_vision ? " (vision_config's vision tower is not run)" : "") + "; " +
                      std::to_string(set_aside) + " tensors set aside (the " +
                      std::to_string(c.num_nextn_predict_layers) + " DSpark draft block(s) mtp.*, vision.*, aligner.*, image_*)";
  return model;
}

DeepseekV41Model::DeepseekV41Model(DeepseekV41Config c, Checkpoint ckpt, std::unique_ptr<DeepseekV41Weights> w,
                                   Backend& backend)
    : config_(std::move(c)), ckpt_(std::move(ckpt)), weights_(std::move(w)), backend_(backend) {
  const DeepseekV41Config& cf = config_;
  hc_ = {cf.hc_mult, cf.hidden_size, cf.hc_sinkhorn_iters, float(cf.hc_eps), float(cf.rms_norm_eps)};
  window_inv_freq_ = yarn_inv_freq(cf.qk_rope_head_dim, cf.rope_theta, RopeScaling{});
  compress_inv_freq_ = yarn_inv_freq(cf.qk_rope_head_dim, cf.compress_rope_theta, cf.rope_scaling);
  info_.architecture = cf.architecture;
  info_.vocab_size = cf.vocab_size;
  info_.n_layers = cf.num_hidden_layers;
  info_.max_position_embeddings = cf.max_position_embeddings;
  info_.eos_token_ids = cf.eos_token_ids;
  info_.bos_token_id = cf.bos_token_id;
  info_.n_params = weights_->n_params;
  info_.n_weight_bytes = weights_->n_bytes;
}

Result<std::vector<KvKindSpec>> DeepseekV41Model::kv_kinds(DType cache_dtype, int block_size) const {
  DI_ASSIGN_OR_RETURN(const V41KvLayout layout, V41KvLayout::make(config_, cache_dtype, block_size));
  return layout.kinds();
}

void DeepseekV41Model::forward(const ForwardBatch& b, const KvCacheView& kv, float* logits) {
  const DeepseekV41Config& c = config_;
  const int64_t n = int64_t(b.n_rows()), d = c.hidden_size, hc = c.hc_mult;
  auto layout = V41KvLayout::make(c, kv.dtype, kv.block_size);
  DI_CHECK(layout.ok());
  layout_ = std::move(layout).value();
  const std::vector<KvKindSpec> kinds = layout_.kinds();
  DI_CHECK(kv.kinds.size() == kinds.size());
  for (size_t k = 0; k < kinds.size(); ++k) DI_CHECK(kv.kinds[k].bytes_per_block == kinds[k].bytes_per_block);
  DI_CHECK(b.positions.size() == b.n_rows());
  for (int64_t r = 0; r < n; ++r) {
    DI_CHECK(b.token_ids[size_t(r)] >= 0 && b.token_ids[size_t(r)] < c.vocab_size);
    DI_CHECK(b.positions[size_t(r)] >= 0 && b.positions[size_t(r)] < c.max_position_embeddings);
  }
  if (ep_) ep_->begin_forward([](int, std::span<const int32_t>) { return Status::Error("no EPLB"); });
  if (n == 0) {  // an idle rank of an expert-parallel group still takes part in every MoE exchange
    if (ep_)
      for (int l = 0; l < c.num_hidden_layers; ++l) ffn(l, b, nullptr, nullptr);
    return;
  }
  int32_t* row_seq = sized(s_.row_seq, size_t(n));
  for (size_t si = 0; si < b.seqs.size(); ++si)
    for (int32_t i = 0; i < b.seqs[si].n_new; ++i) row_seq[b.seqs[si].row_begin + i] = int32_t(si);
  if (layout_.ids_offset >= 0)
    for (int64_t r = 0; r < n; ++r) {
      const int32_t id = compressed_ids_[size_t(b.token_ids[size_t(r)])];
      std::memcpy(layout_.token_id(kv, b.seqs[size_t(row_seq[r])], b.positions[size_t(r)]), &id, 4);
    }
  s_.selected.resize(size_t(n));
  s_.candidates.assign(size_t(n), {});

  float* streams = sized(s_.streams, size_t(n * hc * d));
  float* y = sized(s_.y, size_t(n * d));
  float* xn = sized(s_.xn, size_t(n * d));
  float* out = sized(s_.out, size_t(n * d));
  float* pre = sized(s_.pre, size_t(n * hc));        // the previous site's pre
  float* pre_next = sized(s_.pre_next, size_t(n * hc));
  float* post = sized(s_.post, size_t(n * hc));
  float* comb = sized(s_.comb, size_t(n * hc * hc));
  float* mixes = sized(s_.mixes, size_t(n * (2 + hc) * hc));
  backend_.embed({&weights_->embed, b.token_ids.data(), n, y});
  for (int64_t r = 0; r < n; ++r)
    for (int64_t k = 0; k < hc; ++k) std::copy_n(y + r * d, d, streams + (r * hc + k) * d);
  std::fill_n(pre, n * hc, 0.0f);
  for (int64_t r = 0; r < n; ++r) pre[r * hc] = 1.0f;  // layer 0's attention reads stream 0

  const float eps = float(c.rms_norm_eps);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const V41BlockWeights& L = weights_->layers[size_t(l)];
    if (L.has_engram) engram(l, b, kv, streams);
    hc_mix(backend_, L.hc_attn, hc_, streams, n, pre_next, post, comb, mixes);
    hc_collapse(hc_, pre, streams, n, y);
    backend_.rms_norm({y, d, xn, d, n, d, L.attn_norm.data(), eps});
    attention(l, b, kv, xn, out);
    hc_post(hc_, out, post, comb, n, streams);
    std::swap(pre, pre_next);
    hc_mix(backend_, L.hc_ffn, hc_, streams, n, pre_next, post, comb, mixes);
    hc_collapse(hc_, pre, streams, n, y);
    backend_.rms_norm({y, d, xn, d, n, d, L.ffn_norm.data(), eps});
    ffn(l, b, xn, out);
    hc_post(hc_, out, post, comb, n, streams);
    std::swap(pre, pre_next);
  }

  const int64_t n_out = int64_t(b.logit_rows.size());
  for (int64_t i = 0; i < n_out; ++i) {
    const int32_t r = b.logit_rows[size_t(i)];
    DI_CHECK(r >= 0 && r < n);
    hc_collapse(hc_, pre + int64_t(r) * hc, streams + int64_t(r) * hc * d, 1, y + i * d);
  }
  backend_.rms_norm({y, d, xn, d, n_out, d, weights_->norm.data(), eps});
  backend_.linear({xn, d, n_out, &weights_->head, logits, c.vocab_size});
}

void DeepseekV41Model::engram(int layer, const ForwardBatch& b, const KvCacheView& kv, float* streams) {
  const DeepseekV41Config& c = config_;
  const EngramLayerHash& h = engram_hashes_[size_t(c.engram_index(layer))];
  const int64_t n = int64_t(b.n_rows());
  const int N = c.engram_max_ngram_size, per_token = (N - 1) * c.engram_n_heads;
  const int32_t pad = compressed_ids_[size_t(c.engram_pad_id)];
  int64_t* rows = sized(s_.engram_rows, size_t(n * per_token));
  int32_t ids[16];
  for (int64_t r = 0; r < n; ++r) {
    const BatchSequence& s = b.seqs[size_t(s_.row_seq[size_t(r)])];
    const int32_t p = b.positions[size_t(r)];
    for (int i = 0; i < N; ++i) {
      if (p - i < 0) ids[i] = pad;
      else std::memcpy(&ids[i], layout_.token_id(kv, s, p - i), 4);
    }
    h.rows(ids, rows + r * per_token);
  }
  engram_apply(backend_, weights_->layers[size_t(layer)].engram, c.hc_mult, c.hidden_size, per_token,
               float(c.rms_norm_eps), rows, n, streams, s_.engram);
}

void DeepseekV41Model::ffn(int layer, const ForwardBatch& b, const float* xn, float* out) {
  const DeepseekV41Config& c = config_;
  const V41BlockWeights& L = weights_->layers[size_t(layer)];
  const int64_t n = int64_t(b.n_rows()), d = c.hidden_size, E = c.n_routed_experts, k = c.num_experts_per_tok;
  float* logits = sized(s_.logits, size_t(n * E));
  if (n > 0) backend_.linear({xn, d, n, &L.gate, logits, E});
  int32_t* ids = sized(s_.expert_ids, size_t(n * k));
  float* weights = sized(s_.expert_weights, size_t(n * k));
#pragma omp parallel for if (n > 1)
  for (int64_t r = 0; r < n; ++r) L.router.route(logits + r * E, b.token_ids[size_t(r)], ids + r * k, weights + r * k);
  if (ep_) {
    clamped_moe_expert_parallel(*ep_, layer, backend_, L.experts, L.has_shared ? &L.shared : nullptr,
                                float(c.swiglu_limit), xn, n, d, int(k), ids, weights, out, s_.moe,
                                float(c.swiglu_limit));
    return;
  }
  clamped_moe(backend_, L.experts, L.has_shared ? &L.shared : nullptr, float(c.swiglu_limit), xn, n, d, int(k), ids,
              weights, out, s_.moe, float(c.swiglu_limit));
}

}  // namespace deepinfer
