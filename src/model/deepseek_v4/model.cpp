#include "model/deepseek_v4/model.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "core/check.h"
#include "model/deepseek/yarn_rope.h"
#include "model/deepseek_v4/attention_projections.h"
#include "model/deepseek_v4/indexer.h"
#include "model/deepseek_v4/mtp_block.h"
#include "model/for_each_row.h"
#include "model/scratch.h"

namespace deepinfer {
namespace {

// Per-thread buffers of one row's attention.
struct RowScratch {
  std::vector<float> keys, index_dots, index_scores, token_kv, token_score, entry;
  std::vector<int32_t> selected;
};

RowScratch& row_scratch() {
  thread_local RowScratch s;
  return s;
}

}  // namespace

Result<std::unique_ptr<DeepseekV4Model>> DeepseekV4Model::Load(const std::string& model_dir,
                                                               const ModelOptions& options, Backend& backend) {
  if (options.activation_dtype != DType::F32 && options.activation_dtype != DType::BF16)
    return Status::Error("activation dtype must be f32 or bf16");
  DI_ASSIGN_OR_RETURN(DeepseekV4Config config, DeepseekV4Config::Load(model_dir));
  DI_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(model_dir));
  std::optional<ExpertPlacement> placement;
  if (ExpertGroup* group = options.expert_group) {
    if (options.eplb.redundant_experts > 0 || options.eplb.interval > 0)
      return Status::Error("--expert-parallel: " + config.architecture +
                           " does not rebalance experts (EPLB) yet; run it without redundant experts and rebalancing");
    if (options.mtp_drafting)
      return Status::Error("MTP drafting (--speculative mtp) does not run with expert parallelism");
    DI_ASSIGN_OR_RETURN(ExpertPlacement p, ExpertPlacement::contiguous(config.n_routed_experts, group->size(), group->rank()));
    placement = std::move(p);
  }
  DI_ASSIGN_OR_RETURN(auto weights, DeepseekV4Weights::Bind(ckpt, config, model_dir, placement ? &*placement : nullptr));
  bool requantized = false;
  if (options.lm_head_dtype) {
    DI_ASSIGN_OR_RETURN(requantized, weights->requantize_head(model_dir, *options.lm_head_dtype));
  }
  if (options.activation_dtype == DType::BF16) weights->use_bf16_activations();
  const size_t relaid = options.relay_weights ? weights->relay(backend) : 0;
  auto model = std::unique_ptr<DeepseekV4Model>(
      new DeepseekV4Model(std::move(config), std::move(ckpt), std::move(weights), backend));
  model->info_.activation_dtype = options.activation_dtype;
  if (requantized) model->info_.lm_head_requantized = options.lm_head_dtype;
  model->info_.n_relaid_bytes = relaid;
  if (options.mtp_drafting) {
    DI_ASSIGN_OR_RETURN(V4MtpBlock block, V4MtpBlock::make(*model));
    model->mtp_ = std::make_unique<V4MtpBlock>(std::move(block));
  }
  if (placement) {  // every main layer is an MoE layer
    std::vector<int32_t> moe_layers(size_t(model->config_.num_hidden_layers));
    for (size_t l = 0; l < moe_layers.size(); ++l) moe_layers[l] = int32_t(l);
    model->ep_ = std::make_unique<ExpertParallelMoe>(*options.expert_group, std::move(moe_layers), *placement,
                                                     options.eplb, 1, options.expert_load, backend,
                                                     options.expert_wire_dtype);
  }
  return model;
}

DeepseekV4Model::~DeepseekV4Model() = default;

DeepseekV4Model::DeepseekV4Model(DeepseekV4Config c, Checkpoint ckpt, std::unique_ptr<DeepseekV4Weights> w,
                                 Backend& backend)
    : config_(std::move(c)), ckpt_(std::move(ckpt)), weights_(std::move(w)), backend_(backend) {
  const DeepseekV4Config& cf = config_;
  layer_ratios_.assign(cf.compress_ratios.begin(), cf.compress_ratios.begin() + cf.num_hidden_layers);
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

Result<V4CacheSlots> DeepseekV4Model::cache_slots(DType cache_dtype, int block_size) const {
  const DeepseekV4Config& c = config_;
  return V4CacheSlots::make(layer_ratios_, c.head_dim, c.qk_rope_head_dim, c.index_head_dim, c.sliding_window,
                            cache_dtype, block_size, mtp_ ? c.hc_mult * c.hidden_size : 0);
}

void DeepseekV4Model::use_cache_layout(const KvCacheView& kv) {
  if (slots_dtype_ != kv.dtype || slots_.block_size != kv.block_size || slots_.layers.empty()) {
    auto slots = cache_slots(kv.dtype, kv.block_size);
    DI_CHECK(slots.ok());
    slots_ = std::move(slots).value();
    slots_dtype_ = kv.dtype;
  }
  DI_CHECK(kv.kinds.size() == slots_.kinds.size());
}

Result<std::vector<KvKindSpec>> DeepseekV4Model::kv_kinds(DType cache_dtype, int block_size) const {
  DI_ASSIGN_OR_RETURN(const V4CacheSlots slots, cache_slots(cache_dtype, block_size));
  return slots.kinds;
}

void DeepseekV4Model::forward(const ForwardBatch& b, const KvCacheView& kv, float* logits) {
  forward_with_streams(b, kv, logits, {}, nullptr);
}

void DeepseekV4Model::forward_with_streams(const ForwardBatch& b, const KvCacheView& kv, float* logits,
                                           const std::vector<int32_t>& stream_rows, float* streams_out) {
  const DeepseekV4Config& c = config_;
  const int64_t n = int64_t(b.n_rows()), d = c.hidden_size, hc = c.hc_mult;
  use_cache_layout(kv);
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

  float* streams = sized(s_.streams, size_t(n * hc * d));
  float* y = sized(s_.y, size_t(n * d));
  float* xn = sized(s_.xn, size_t(n * d));
  float* out = sized(s_.out, size_t(n * d));
  float* post = sized(s_.post, size_t(n * hc));
  float* comb = sized(s_.comb, size_t(n * hc * hc));
  float* mixes = sized(s_.mixes, size_t(n * (2 + hc) * hc));
  backend_.embed({&weights_->embed, b.token_ids.data(), n, y});
  for (int64_t r = 0; r < n; ++r)
    for (int64_t k = 0; k < hc; ++k) std::copy_n(y + r * d, d, streams + (r * hc + k) * d);

  const float eps = float(c.rms_norm_eps);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const V4BlockWeights& L = weights_->layers[size_t(l)];
    hc_pre(backend_, L.hc_attn, hc_, streams, n, y, post, comb, mixes);
    backend_.rms_norm({y, d, xn, d, n, d, L.attn_norm.data(), eps});
    attention(l, b, kv, xn, out);
    hc_post(hc_, out, post, comb, n, streams);
    hc_pre(backend_, L.hc_ffn, hc_, streams, n, y, post, comb, mixes);
    backend_.rms_norm({y, d, xn, d, n, d, L.ffn_norm.data(), eps});
    ffn(l, b, xn, out);
    hc_post(hc_, out, post, comb, n, streams);
  }

  if (mtp_) write_mtp_state(b, kv, streams);
  for (size_t i = 0; i < stream_rows.size(); ++i) {
    DI_CHECK(stream_rows[i] >= 0 && stream_rows[i] < n);
    std::copy_n(streams + int64_t(stream_rows[i]) * hc * d, hc * d, streams_out + int64_t(i) * hc * d);
  }
  const int64_t n_out = int64_t(b.logit_rows.size());
  for (int64_t i = 0; i < n_out; ++i) DI_CHECK(b.logit_rows[size_t(i)] >= 0 && b.logit_rows[size_t(i)] < n);
  hc_head(backend_, weights_->hc_head, hc_, streams, b.logit_rows.data(), n_out, y, mixes);
  backend_.rms_norm({y, d, xn, d, n_out, d, weights_->norm.data(), eps});
  backend_.linear({xn, d, n_out, &weights_->head, logits, c.vocab_size});
}

void DeepseekV4Model::write_mtp_state(const ForwardBatch& b, const KvCacheView& kv, const float* streams) {
  const int64_t n = int64_t(b.n_rows()), width = int64_t(config_.hc_mult) * config_.hidden_size;
  const int64_t hd = config_.head_dim, rd = config_.qk_rope_head_dim;
  s_.mtp_rows.clear();
  s_.mtp_ids.clear();
  s_.mtp_positions.clear();
  float* h = sized(s_.mtp_h, size_t(n * width));
  for (int64_t r = 0; r < n; ++r) {
    const BatchSequence& s = b.seqs[size_t(s_.row_seq[size_t(r)])];
    const int32_t p = b.positions[size_t(r)];
    if (p >= 1) {  // h_{p-1}: this step's row before, or the streams kind for a chunk's first row
      const float* prev = r > s.row_begin ? streams + (r - 1) * width : slots_.mtp_streams(kv, s.block_tables.data(), p - 1);
      std::copy_n(prev, width, h + int64_t(s_.mtp_rows.size()) * width);
      s_.mtp_rows.push_back(int32_t(r));
      s_.mtp_ids.push_back(b.token_ids[size_t(r)]);
      s_.mtp_positions.push_back(p);
    }
  }
  // Streams are stored after the reads above: a chunk's first row reads position p - 1, which no
  // row of this step writes.
  for (int64_t r = 0; r < n; ++r) {
    const BatchSequence& s = b.seqs[size_t(s_.row_seq[size_t(r)])];
    std::copy_n(streams + r * width, width, slots_.mtp_streams(kv, s.block_tables.data(), b.positions[size_t(r)]));
  }
  const int64_t m = int64_t(s_.mtp_rows.size());
  float* entries = sized(s_.mtp_kv, size_t(m * hd));
  mtp_->kv_entries(h, s_.mtp_ids.data(), s_.mtp_positions.data(), m, entries);
  for (int64_t i = 0; i < m; ++i) {
    const BatchSequence& s = b.seqs[size_t(s_.row_seq[size_t(s_.mtp_rows[size_t(i)])])];
    uint8_t* e = slots_.mtp_kv_entry(kv, s.block_tables.data(), s_.mtp_positions[size_t(i)]);
    store_latent(e, slots_.mtp_kv, 0, entries + i * hd, int(hd - rd));
    store_rope(e, slots_.mtp_kv, entries + i * hd + hd - rd);
  }
}

void DeepseekV4Model::draft(std::span<const DraftQuery> queries, const KvCacheView& kv, int32_t* drafts) {
  DI_CHECK(mtp_ != nullptr);
  use_cache_layout(kv);
  mtp_->draft(queries, slots_, kv, drafts);
}

void DeepseekV4Model::compress(const CompressorWeights& w, int layer, bool index_keys, const ForwardBatch& b,
                               const KvCacheView& kv, const float* xn) {
  const V4LayerSlots& slot = slots_.layers[size_t(layer)];
  const int inputs_kv = index_keys ? slot.idx_kv : slot.comp_kv, inputs_score = index_keys ? slot.idx_score : slot.comp_score;
  const int64_t n = int64_t(b.n_rows()), width = int64_t(w.coff()) * w.dim;
  const int rd = config_.qk_rope_head_dim;
  float* ckv = sized(s_.ckv, size_t(n * width));
  float* cscore = sized(s_.cscore, size_t(n * width));
  compressor_token_inputs(backend_, w, xn, config_.hidden_size, n, b.positions.data(), ckv, cscore);
#pragma omp parallel for if (n > 1)
  for (int64_t r = 0; r < n; ++r) {
    const BatchSequence& s = b.seqs[size_t(s_.row_seq[size_t(r)])];
    uint8_t* e = slots_.inputs_entry(kv, s, layer, b.positions[size_t(r)]);
    store_latent(e, slot.inputs, inputs_kv, ckv + r * width, int(width));
    store_latent(e, slot.inputs, inputs_score, cscore + r * width, int(width));
  }
  // Rows that complete a group pool it from the cached inputs (so a group split across steps
  // pools the same values as one computed in a single step).
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
  for (int64_t r = 0; r < n; ++r) {
    const int32_t pos = b.positions[size_t(r)];
    if ((pos + 1) % w.ratio != 0) continue;
    const BatchSequence& s = b.seqs[size_t(s_.row_seq[size_t(r)])];
    const int32_t group = (pos + 1) / w.ratio - 1;
    const int n_prev = w.overlap && group > 0 ? w.ratio : 0;
    const int32_t first = group * w.ratio - n_prev;
    RowScratch& rs = row_scratch();
    float* tkv = sized(rs.token_kv, size_t((n_prev + w.ratio) * width));
    float* tscore = sized(rs.token_score, size_t((n_prev + w.ratio) * width));
    for (int t = 0; t < n_prev + w.ratio; ++t) {
      const uint8_t* e = slots_.inputs_entry(kv, s, layer, first + t);
      load_latent(e, slot.inputs, inputs_kv, tkv + t * width, int(width));
      load_latent(e, slot.inputs, inputs_score, tscore + t * width, int(width));
    }
    float* entry = sized(rs.entry, size_t(w.dim));
    compressor_pool(w, tkv, tscore, n_prev, entry);
    backend_.rms_norm({entry, w.dim, entry, w.dim, 1, w.dim, w.norm.data(), float(config_.rms_norm_eps)});
    const int32_t entry_pos = group * w.ratio;
    backend_.rope({entry + w.dim - rd, 0, 0, 1, 1, rd, &entry_pos, compress_inv_freq_.data(), 1.0f});
    if (index_keys) {
      store_latent(slots_.index_key(kv, s, layer, group), slot.key, 0, entry, w.dim);
    } else {
      uint8_t* e = slots_.compressed_entry(kv, s, layer, group);
      store_latent(e, slot.entry, 0, entry, w.dim - rd);
      store_rope(e, slot.entry, entry + w.dim - rd);
    }
  }
}

void DeepseekV4Model::attention(int layer, const ForwardBatch& b, const KvCacheView& kv, const float* xn,
                                float* out) {
  const DeepseekV4Config& c = config_;
  const V4AttentionWeights& a = weights_->layers[size_t(layer)].attn;
  const V4LayerSlots& slot = slots_.layers[size_t(layer)];
  const int64_t n = int64_t(b.n_rows()), d = c.hidden_size, H = c.num_attention_heads, hd = c.head_dim;
  const int rd = c.qk_rope_head_dim, ratio = a.compress_ratio;
  const float* inv_freq = ratio > 0 ? compress_inv_freq_.data() : window_inv_freq_.data();
  const int32_t* pos = b.positions.data();

  float* qr = sized(s_.qr, size_t(n * c.q_lora_rank));
  float* q = sized(s_.q, size_t(n * H * hd));
  v4_attention_query(backend_, c, a, xn, n, pos, inv_freq, qr, q);
  float* kvr = sized(s_.kv, size_t(n * hd));
  v4_attention_kv(backend_, c, a, xn, n, pos, inv_freq, kvr);
#pragma omp parallel for if (n > 1)
  for (int64_t r = 0; r < n; ++r) {
    const BatchSequence& s = b.seqs[size_t(s_.row_seq[size_t(r)])];
    uint8_t* e = slots_.kv_entry(kv, s, layer, pos[r]);
    store_latent(e, slot.kv, 0, kvr + r * hd, int(hd - rd));
    store_rope(e, slot.kv, kvr + r * hd + hd - rd);
  }
  if (ratio > 0) compress(a.compressor, layer, false, b, kv, xn);
  const IndexerWeights& ix = a.indexer;
  float* iq = nullptr;
  float* iw = nullptr;
  if (ratio == 4) {
    compress(ix.compressor, layer, true, b, kv, xn);
    iq = sized(s_.iq, size_t(n * ix.n_heads * ix.head_dim));
    backend_.linear({qr, c.q_lora_rank, n, &ix.wq_b, iq, int64_t(ix.n_heads) * ix.head_dim});
    backend_.rope({iq + ix.head_dim - rd, int64_t(ix.n_heads) * ix.head_dim, ix.head_dim, n, ix.n_heads, rd, pos,
                   inv_freq, 1.0f});
    iw = sized(s_.iw, size_t(n * ix.n_heads));
    backend_.linear({xn, d, n, &ix.weights_proj, iw, ix.n_heads});
  }

  // Under bf16 activations over a bf16 or fp8 cache the indexer scores the keys where they are
  // cached against its query rounded to bf16 (Backend::indexer_scores); otherwise in f32.
  const bool bf16_index = info_.activation_dtype == DType::BF16 &&
                          (slot.key.dtype == DType::BF16 || (slot.key.dtype == DType::F8_E4M3 && ix.head_dim <= 128));
  // Each sequence's indexer keys, once for all of its rows: where the cache holds them (bf16 or fp8, scored in bf16 products), or
  // gathered as f32 [entries, index_head_dim]. index_key_offset counts keys.
  if (ratio == 4) {
    s_.index_key_offset.assign(b.seqs.size() + 1, 0);
    for (size_t si = 0; si < b.seqs.size(); ++si)
      s_.index_key_offset[si + 1] = s_.index_key_offset[si] + size_t(b.seqs[si].n_ctx / ratio);
    if (bf16_index) sized(s_.index_key_rows, s_.index_key_offset.back());
    else sized(s_.index_keys, s_.index_key_offset.back() * size_t(ix.head_dim));
#pragma omp parallel for schedule(dynamic, 1) if (b.seqs.size() > 1)
    for (size_t si = 0; si < b.seqs.size(); ++si) {
      const BatchSequence& s = b.seqs[si];
      for (int w = 0; w < s.n_ctx / ratio; ++w) {
        const uint8_t* e = slots_.index_key(kv, s, layer, w);
        const size_t at = s_.index_key_offset[si] + size_t(w);
        if (bf16_index) s_.index_key_rows[at] = e;
        else load_latent(e, slot.key, 0, s_.index_keys.data() + at * size_t(ix.head_dim), ix.head_dim);
      }
    }
  }

  float* o = sized(s_.o, size_t(n * H * hd));
  const float scale = float(1.0 / std::sqrt(double(hd)));
  // Under bf16 activations over a bf16 or fp8 cache the attention's dot products are bf16 ones
  // (SinkAttentionParams' BF16), as the V3 line's over its latents; over an f32 cache, f32.
  const bool bf16_dots = info_.activation_dtype == DType::BF16 && slot.kv.dtype != DType::F32 &&
                         (ratio == 0 || slot.entry.dtype != DType::F32);
  for_each_row(n, [&](int64_t r) {
    const BatchSequence& s = b.seqs[size_t(s_.row_seq[size_t(r)])];
    const int32_t p = pos[r];
    const int32_t first = std::max(0, p - c.sliding_window + 1);
    const int n_window = p - first + 1;
    const int n_visible = ratio > 0 ? (p + 1) / ratio : 0;  // complete groups
    RowScratch& rs = row_scratch();
    int32_t* selected = sized(rs.selected, size_t(std::max(n_visible, 1)));
    int n_selected = n_visible;
    if (ratio == 4) {
      const size_t at = s_.index_key_offset[size_t(s_.row_seq[size_t(r)])];
      const float* iq_r = iq + r * ix.n_heads * ix.head_dim;
      n_selected = bf16_index ? indexer_select_bf16(backend_, ix, iq_r, iw + r * ix.n_heads, s_.index_key_rows.data() + at,
                                                    slot.key.dtype, n_visible, selected, rs.index_dots, rs.index_scores)
                              : indexer_select(backend_, ix, iq_r, iw + r * ix.n_heads,
                                               s_.index_keys.data() + at * size_t(ix.head_dim), n_visible, selected,
                                               rs.index_dots, rs.index_scores);
    } else {
      for (int w = 0; w < n_visible; ++w) selected[w] = w;
    }
    float* keys = sized(rs.keys, size_t(n_window + n_selected) * size_t(hd));
    for (int t = 0; t < n_window; ++t) {
      const uint8_t* e = slots_.kv_entry(kv, s, layer, first + t);
      load_latent(e, slot.kv, 0, keys + t * hd, int(hd - rd));
      load_rope(e, slot.kv, keys + t * hd + hd - rd);
    }
    for (int i = 0; i < n_selected; ++i) {
      const uint8_t* e = slots_.compressed_entry(kv, s, layer, selected[i]);
      load_latent(e, slot.entry, 0, keys + (n_window + i) * hd, int(hd - rd));
      load_rope(e, slot.entry, keys + (n_window + i) * hd + hd - rd);
    }
    backend_.sink_attention({q + r * H * hd, keys, a.sink.data(), o + r * H * hd, int(H), int(hd), n_window + n_selected,
                             scale, bf16_dots ? DType::BF16 : DType::F32});
  });
  float* og = sized(s_.og, size_t(n * c.o_groups * c.o_lora_rank));
  v4_attention_output(backend_, c, a, o, n, pos, inv_freq, og, s_.neg_positions, out);
}

void DeepseekV4Model::ffn(int layer, const ForwardBatch& b, const float* xn, float* out) {
  const DeepseekV4Config& c = config_;
  const V4BlockWeights& L = weights_->layers[size_t(layer)];
  const int64_t n = int64_t(b.n_rows()), d = c.hidden_size, E = c.n_routed_experts, k = c.num_experts_per_tok;
  float* logits = sized(s_.logits, size_t(n * E));
  if (n > 0) backend_.linear({xn, d, n, &L.gate, logits, E});
  int32_t* ids = sized(s_.expert_ids, size_t(n * k));
  float* weights = sized(s_.expert_weights, size_t(n * k));
#pragma omp parallel for if (n > 1)
  for (int64_t r = 0; r < n; ++r) L.router.route(logits + r * E, b.token_ids[size_t(r)], ids + r * k, weights + r * k);
  if (ep_) {
    clamped_moe_expert_parallel(*ep_, layer, backend_, L.experts, L.has_shared ? &L.shared : nullptr,
                                float(c.swiglu_limit), xn, n, d, int(k), ids, weights, out, s_.moe);
    return;
  }
  clamped_moe(backend_, L.experts, L.has_shared ? &L.shared : nullptr, float(c.swiglu_limit), xn, n, d, int(k), ids,
              weights, out, s_.moe);
}

}  // namespace deepinfer
