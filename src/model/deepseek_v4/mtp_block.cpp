#include "model/deepseek_v4/mtp_block.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/check.h"
#include "model/deepseek/yarn_rope.h"
#include "model/deepseek_v4/attention_projections.h"
#include "model/deepseek_v4/cache_slots.h"
#include "model/deepseek_v4/hyper_connection.h"

namespace deepinfer {
namespace {

float* sized(std::vector<float>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

}  // namespace

Result<V4MtpBlock> V4MtpBlock::make(const DeepseekV4Model& model, int index) {
  const DeepseekV4Config& c = model.config();
  if (index < 0 || size_t(index) >= model.weights().mtp.size())
    return Status::Error("the checkpoint has no MTP block mtp." + std::to_string(index) +
                         " (num_nextn_predict_layers " + std::to_string(c.num_nextn_predict_layers) + ")");
  const int ratio = c.compress_ratio(c.num_hidden_layers + index);
  if (ratio != 0)
    return Status::Error("MTP block mtp." + std::to_string(index) + " has compress ratio " + std::to_string(ratio) +
                         ": only sliding-window MTP blocks (ratio 0, as published) are supported");
  return V4MtpBlock(model, model.weights().mtp[size_t(index)]);
}

V4MtpBlock::V4MtpBlock(const DeepseekV4Model& model, const V4MtpWeights& w)
    : config_(&model.config()), model_weights_(&model.weights()), w_(&w), backend_(&model.backend()) {
  const DeepseekV4Config& c = *config_;
  hc_ = {c.hc_mult, c.hidden_size, c.hc_sinkhorn_iters, float(c.hc_eps), float(c.rms_norm_eps)};
  inv_freq_ = yarn_inv_freq(c.qk_rope_head_dim, c.rope_theta, RopeScaling{});
}

void V4MtpBlock::attention_input(const float* streams, const int32_t* next_ids, int64_t n) {
  const DeepseekV4Config& c = *config_;
  const V4BlockWeights& B = w_->block;
  const int64_t d = c.hidden_size, hc = c.hc_mult;
  const float eps = float(c.rms_norm_eps);
  Backend& be = *backend_;
  for (int64_t i = 0; i < n; ++i) DI_CHECK(next_ids[i] >= 0 && next_ids[i] < c.vocab_size);
  float* x = sized(x_, size_t(n * hc * d));  // the block's streams [n, hc, hidden]
  float* y = sized(y_, size_t(n * hc * d));
  float* xn = sized(xn_, size_t(n * d));
  float* out = sized(out_, size_t(n * d));
  float* post = sized(post_, size_t(n * hc));
  float* comb = sized(comb_, size_t(n * hc * hc));
  float* mixes = sized(mixes_, size_t(n * (2 + hc) * hc));

  be.embed({&model_weights_->embed, next_ids, n, xn});
  be.rms_norm({xn, d, xn, d, n, d, w_->enorm.data(), eps});
  be.linear({xn, d, n, &w_->e_proj, out, d});  // e_proj(enorm(embed(s[t+1]))): [n, hidden]
  be.rms_norm({streams, d, y, d, n * hc, d, w_->hnorm.data(), eps});
  be.linear({y, d, n * hc, &w_->h_proj, x, d});
  for (int64_t r = 0; r < n; ++r)
    for (int64_t k = 0; k < hc; ++k)
      for (int64_t i = 0; i < d; ++i) x[(r * hc + k) * d + i] += out[r * d + i];

  hc_pre(be, B.hc_attn, hc_, x, n, y, post, comb, mixes);
  be.rms_norm({y, d, xn, d, n, d, B.attn_norm.data(), eps});
}

void V4MtpBlock::finish(const int32_t* next_ids, int64_t n, float* logits) {
  const DeepseekV4Config& c = *config_;
  const V4BlockWeights& B = w_->block;
  const int64_t d = c.hidden_size;
  const float eps = float(c.rms_norm_eps);
  Backend& be = *backend_;
  float *x = x_.data(), *y = y_.data(), *xn = xn_.data(), *out = out_.data(), *post = post_.data(),
        *comb = comb_.data(), *mixes = mixes_.data();
  hc_post(hc_, out, post, comb, n, x);

  hc_pre(be, B.hc_ffn, hc_, x, n, y, post, comb, mixes);
  be.rms_norm({y, d, xn, d, n, d, B.ffn_norm.data(), eps});
  const int64_t E = c.n_routed_experts, k = c.num_experts_per_tok;
  float* gate_logits = sized(gate_logits_, size_t(n * E));
  be.linear({xn, d, n, &B.gate, gate_logits, E});
  if (expert_ids_.size() < size_t(n * k)) expert_ids_.resize(size_t(n * k));
  float* expert_weights = sized(expert_weights_, size_t(n * k));
  for (int64_t r = 0; r < n; ++r)
    B.router.route(gate_logits + r * E, next_ids[r], expert_ids_.data() + r * k, expert_weights + r * k);
  clamped_moe(be, B.experts, B.has_shared ? &B.shared : nullptr, float(c.swiglu_limit), xn, n, d, int(k),
              expert_ids_.data(), expert_weights, out, moe_);
  hc_post(hc_, out, post, comb, n, x);

  head_rows_.resize(size_t(n));
  for (int64_t r = 0; r < n; ++r) head_rows_[size_t(r)] = int32_t(r);
  hc_head(be, w_->hc_head, hc_, x, head_rows_.data(), n, y, mixes);
  be.rms_norm({y, d, xn, d, n, d, w_->norm.data(), eps});
  be.linear({xn, d, n, &model_weights_->head, logits, c.vocab_size});
}

void V4MtpBlock::forward(const float* streams, const int32_t* next_ids, int32_t t0, int64_t n, float* logits) {
  if (n == 0) return;
  positions_.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) positions_[size_t(i)] = t0 + int32_t(i);
  attention_input(streams, next_ids, n);
  attention(xn_.data(), n, out_.data());
  finish(next_ids, n, logits);
}

void V4MtpBlock::kv_entries(const float* streams, const int32_t* next_ids, const int32_t* positions, int64_t n,
                            float* kv) {
  if (n == 0) return;
  attention_input(streams, next_ids, n);
  v4_attention_kv(*backend_, *config_, w_->block.attn, xn_.data(), n, positions, inv_freq_.data(), kv);
}

void V4MtpBlock::draft(std::span<const DraftQuery> queries, const V4CacheSlots& slots, const KvCacheView& kv,
                       int32_t* drafts) {
  const DeepseekV4Config& c = *config_;
  const V4AttentionWeights& a = w_->block.attn;
  const int64_t width = int64_t(c.hc_mult) * c.hidden_size, H = c.num_attention_heads, hd = c.head_dim;
  const int rd = c.qk_rope_head_dim;
  const int64_t nq = int64_t(queries.size());
  int max_drafts = 0;
  std::vector<size_t> first_draft(queries.size());  // of each query in `drafts`
  size_t n_total = 0;
  for (size_t i = 0; i < queries.size(); ++i) {
    DI_CHECK(queries[i].n_ctx >= 1 && queries[i].n_drafts >= 1);
    first_draft[i] = n_total;
    n_total += size_t(queries[i].n_drafts);
    max_drafts = std::max(max_drafts, queries[i].n_drafts);
  }
  // Per query: its h [width], its token, its in-flight K=V [max_drafts, head_dim].
  float* h = sized(h_, size_t(nq * width));
  float* inflight = sized(draft_kv_, size_t(nq) * size_t(max_drafts) * size_t(hd));
  draft_ids_.resize(size_t(nq));
  for (int64_t i = 0; i < nq; ++i) {
    std::copy_n(slots.mtp_streams(kv, queries[size_t(i)].block_tables.data(), queries[size_t(i)].n_ctx - 1), width,
                h + i * width);
    draft_ids_[size_t(i)] = queries[size_t(i)].token;
  }
  const float scale = float(1.0 / std::sqrt(double(hd)));
  for (int j = 0; j < max_drafts; ++j) {
    // The queries still drafting, as this pass's rows.
    draft_query_.clear();
    for (int64_t i = 0; i < nq; ++i)
      if (queries[size_t(i)].n_drafts > j) draft_query_.push_back(int32_t(i));
    const int64_t n = int64_t(draft_query_.size());
    std::vector<float> row_h(size_t(n * width));
    std::vector<int32_t> row_ids(static_cast<size_t>(n));
    positions_.resize(size_t(n));
    for (int64_t r = 0; r < n; ++r) {
      const int32_t i = draft_query_[size_t(r)];
      std::copy_n(h + int64_t(i) * width, width, row_h.data() + r * width);
      row_ids[size_t(r)] = draft_ids_[size_t(i)];
      positions_[size_t(r)] = queries[size_t(i)].n_ctx + j;
    }
    attention_input(row_h.data(), row_ids.data(), n);
    float* qr = sized(qr_, size_t(n * c.q_lora_rank));
    float* q = sized(q_, size_t(n * H * hd));
    v4_attention_query(*backend_, c, a, xn_.data(), n, positions_.data(), inv_freq_.data(), qr, q);
    float* own = sized(kv_, size_t(n * hd));
    v4_attention_kv(*backend_, c, a, xn_.data(), n, positions_.data(), inv_freq_.data(), own);
    float* o = sized(o_, size_t(n * H * hd));
    for (int64_t r = 0; r < n; ++r) {
      const int32_t i = draft_query_[size_t(r)];
      const DraftQuery& dq = queries[size_t(i)];
      float* mine = inflight + (size_t(i) * size_t(max_drafts) + size_t(j)) * size_t(hd);
      std::copy_n(own + r * hd, hd, mine);
      const int32_t p = positions_[size_t(r)];
      const int32_t first = std::max(1, p - c.sliding_window + 1);
      const int n_cached = std::max(0, dq.n_ctx - first), n_keys = p - first + 1;
      float* keys = sized(keys_, size_t(n_keys) * size_t(hd));
      for (int t = 0; t < n_cached; ++t) {
        const uint8_t* e = slots.mtp_kv_entry(kv, dq.block_tables.data(), first + t);
        load_latent(e, slots.mtp_kv, 0, keys + t * hd, int(hd - rd));
        load_rope(e, slots.mtp_kv, keys + t * hd + hd - rd);
      }
      // In-flight entries of drafts [n_keys - n_cached - 1 .. j] ahead of this query, then its own.
      const int n_inflight = n_keys - n_cached;
      std::copy_n(inflight + (size_t(i) * size_t(max_drafts) + size_t(j + 1 - n_inflight)) * size_t(hd),
                  size_t(n_inflight) * size_t(hd), keys + size_t(n_cached) * size_t(hd));
      backend_->sink_attention({q + r * H * hd, keys, a.sink.data(), o + r * H * hd, int(H), int(hd), n_keys, scale});
    }
    float* og = sized(og_, size_t(n * c.o_groups * c.o_lora_rank));
    v4_attention_output(*backend_, c, a, o, n, positions_.data(), inv_freq_.data(), og, neg_positions_, out_.data());
    float* logits = sized(draft_logits_, size_t(n) * size_t(c.vocab_size));
    finish(row_ids.data(), n, logits);
    for (int64_t r = 0; r < n; ++r) {
      const int32_t i = draft_query_[size_t(r)];
      const float* l = logits + r * c.vocab_size;
      const int32_t best = int32_t(std::max_element(l, l + c.vocab_size) - l);
      drafts[first_draft[size_t(i)] + size_t(j)] = best;
      draft_ids_[size_t(i)] = best;
      std::copy_n(x_.data() + r * width, width, h + int64_t(i) * width);
    }
  }
}

void V4MtpBlock::attention(const float* xn, int64_t n, float* out) {
  const DeepseekV4Config& c = *config_;
  const V4AttentionWeights& a = w_->block.attn;
  const int64_t H = c.num_attention_heads, hd = c.head_dim;
  const int32_t* pos = positions_.data();
  float* qr = sized(qr_, size_t(n * c.q_lora_rank));
  float* q = sized(q_, size_t(n * H * hd));
  v4_attention_query(*backend_, c, a, xn, n, pos, inv_freq_.data(), qr, q);
  float* kv = sized(kv_, size_t(n * hd));  // the block's K=V entries of this call: [n, head_dim]
  v4_attention_kv(*backend_, c, a, xn, n, pos, inv_freq_.data(), kv);
  float* o = sized(o_, size_t(n * H * hd));
  const float scale = float(1.0 / std::sqrt(double(hd)));
  for (int64_t r = 0; r < n; ++r) {
    const int64_t first = std::max<int64_t>(0, r - c.sliding_window + 1);
    backend_->sink_attention(
        {q + r * H * hd, kv + first * hd, a.sink.data(), o + r * H * hd, int(H), int(hd), int(r - first + 1), scale});
  }
  float* og = sized(og_, size_t(n * c.o_groups * c.o_lora_rank));
  v4_attention_output(*backend_, c, a, o, n, pos, inv_freq_.data(), og, neg_positions_, out);
}

Result<std::vector<float>> v4_mtp_probe_logits(DeepseekV4Model& model, const std::vector<int32_t>& ids) {
  const DeepseekV4Config& c = model.config();
  if (ids.size() < 2) return Status::Error("the MTP probe needs at least 2 token ids, got " + std::to_string(ids.size()));
  for (int32_t id : ids)
    if (id < 0 || id >= c.vocab_size)
      return Status::Error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                           std::to_string(c.vocab_size) + ")");
  const int32_t n = int32_t(ids.size() - 1);  // MTP positions t = 0 .. L-2
  if (n > c.max_position_embeddings)
    return Status::Error(std::to_string(ids.size()) + " token ids exceed max_position_embeddings " +
                         std::to_string(c.max_position_embeddings));
  DI_ASSIGN_OR_RETURN(V4MtpBlock block, V4MtpBlock::make(model));

  // One sequence in one step: every kind gets blocks 0 .. n_blocks-1 in order.
  const int block_size = 16;
  DI_ASSIGN_OR_RETURN(const std::vector<KvKindSpec> kinds, model.kv_kinds(DType::F32, block_size));
  const int n_blocks = (n + block_size - 1) / block_size;
  std::vector<std::vector<uint8_t>> memory;
  std::vector<int32_t> table(static_cast<size_t>(n_blocks));
  for (int i = 0; i < n_blocks; ++i) table[size_t(i)] = i;
  KvCacheView view{DType::F32, block_size, {}};
  BatchSequence seq{0, n, n, {}};
  for (size_t k = 0; k < kinds.size(); ++k) {
    KvKindView& v = view.kinds.emplace_back();
    v.n_blocks = n_blocks;
    v.bytes_per_block = kinds[k].bytes_per_block;
    for (int s = 0; s < kinds[k].n_slabs; ++s) v.slab_base.push_back(memory.emplace_back(kinds[k].bytes_per_block * size_t(n_blocks)).data());
    seq.block_tables[k] = table.data();
  }
  ForwardBatch b;
  b.seqs = {seq};
  b.token_ids.assign(ids.begin(), ids.end() - 1);
  for (int32_t t = 0; t < n; ++t) b.positions.push_back(t);
  b.logit_rows = {n - 1};

  const int64_t width = int64_t(c.hc_mult) * c.hidden_size;
  std::vector<float> main_logits(size_t(c.vocab_size)), streams(size_t(n) * size_t(width));
  model.forward_with_streams(b, view, main_logits.data(), b.positions, streams.data());  // rows 0 .. n-1
  std::vector<float> logits(size_t(n) * size_t(c.vocab_size));
  block.forward(streams.data(), ids.data() + 1, 0, n, logits.data());
  return logits;
}

}  // namespace deepinfer
