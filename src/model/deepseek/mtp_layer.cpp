// DeepSeek-V3's MTP layer in DeepseekModel: what forward() keeps for it and the drafts it
// proposes (model.h says what the kinds hold and why).
#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "model/deepseek/model.h"
#include "model/scratch.h"

namespace deepinfer {
namespace {

constexpr int kMtpLatent = 1, kMtpHidden = 2;  // kv_kinds() order, after "latent"

// Position p's slot ([hidden] f32) in a sequence's mtp_hidden blocks.
float* hidden_slot(const KvCacheView& kv, const int32_t* table, int32_t p, int64_t d) {
  const int32_t block = table[p / kv.block_size];
  DI_CHECK(block >= 0);
  return reinterpret_cast<float*>(kv.kinds[kMtpHidden].block(0, block)) + size_t(p % kv.block_size) * size_t(d);
}

void add_into(float* x, const float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace

void DeepseekModel::mtp_input(const int32_t* tokens, const float* h, int64_t n, float* out) {
  const ModelConfig& c = config_;
  const MtpLayerWeights& m = *weights_->mtp;
  const int64_t d = c.hidden_size;
  const float eps = float(c.rms_norm_eps);
  float* e = sized(s_.m_e, size_t(n * d));
  float* cat = sized(s_.m_cat, size_t(n * 2 * d));
  backend_.embed({&weights_->embed, tokens, n, e});
  backend_.rms_norm({e, d, cat, 2 * d, n, d, m.enorm.data(), eps});
  backend_.rms_norm({h, d, cat + d, 2 * d, n, d, m.hnorm.data(), eps});
  backend_.linear({cat, 2 * d, n, &m.eh_proj, out, d});
}

void DeepseekModel::mtp_store(const ForwardBatch& b, const KvCacheView& kv, const float* x) {
  const ModelConfig& c = config_;
  const MlaWeights& a = weights_->mtp->block.attn;
  const int64_t n = int64_t(b.n_rows()), d = c.hidden_size, lat = c.kv_lora_rank, rd = c.qk_rope_head_dim;
  const float eps = float(c.rms_norm_eps);
  float* h = sized(s_.m_h, size_t(n * d));
  backend_.rms_norm({x, d, h, d, n, d, weights_->final_norm.data(), eps});
  // Each row's pair: h of the position before (this step's row, or the cache), then this step's h.
  float* prev = sized(s_.m_prev, size_t(n * d));
  for (const BatchSequence& s : b.seqs) {
    for (int32_t r = s.row_begin; r < s.row_begin + s.n_new; ++r) {
      const int32_t p = b.positions[size_t(r)];
      float* dst = prev + size_t(r) * size_t(d);
      if (r > s.row_begin) std::memcpy(dst, h + size_t(r - 1) * size_t(d), size_t(d) * sizeof(float));
      else if (p == 0) std::fill_n(dst, d, 0.0f);  // no pair ends at position 0: slot 0 is never read
      else std::memcpy(dst, hidden_slot(kv, s.block_tables[kMtpHidden], p - 1, d), size_t(d) * sizeof(float));
    }
  }
  for (const BatchSequence& s : b.seqs)
    for (int32_t r = s.row_begin; r < s.row_begin + s.n_new; ++r)
      std::memcpy(hidden_slot(kv, s.block_tables[kMtpHidden], b.positions[size_t(r)], d), h + size_t(r) * size_t(d),
                  size_t(d) * sizeof(float));

  // The layer's latent entry of pair (h_{p-1}, s[p]) into slot p, RoPE at p - 1.
  float* in = sized(s_.m_x, size_t(n * d));
  mtp_input(b.token_ids.data(), prev, n, in);
  float* hn = sized(s_.m_hn, size_t(n * d));
  backend_.rms_norm({in, d, hn, d, n, d, weights_->mtp->block.input_norm.data(), eps});
  float* kv_a = sized(s_.kv_a, size_t(n * (lat + rd)));
  backend_.linear({hn, d, n, &a.kv_a_proj, kv_a, lat + rd});
  float* latent = sized(s_.latent, size_t(n * lat));
  backend_.rms_norm({kv_a, lat + rd, latent, lat, n, lat, a.kv_a_norm.data(), eps});
  int32_t* rope_pos = sized(s_.m_rope_pos, size_t(n));
  for (int64_t r = 0; r < n; ++r) rope_pos[r] = std::max(0, b.positions[size_t(r)] - 1);
  backend_.rope({kv_a + lat, lat + rd, 0, n, 1, int(rd), rope_pos, rope_.inv_freq.data(), rope_.cos_sin_scale});
  backend_.mla_kv_store({latent, lat, kv_a + lat, lat + rd, &b, kv.kinds[kMtpLatent].slab_base[0],
                         cache_layout(kv.dtype), kv.block_size, kMtpLatent});
}

void DeepseekModel::draft(std::span<const DraftQuery> queries, const KvCacheView& kv, int32_t* drafts) {
  DI_CHECK(can_draft());
  mtp_chain(queries, kv, drafts, nullptr);
}

void DeepseekModel::draft_logits(std::span<const DraftQuery> queries, const KvCacheView& kv, float* logits) {
  DI_CHECK(can_draft());
  size_t n_drafts = 0;
  for (const DraftQuery& q : queries) n_drafts += size_t(q.n_drafts);
  std::vector<int32_t> drafts(n_drafts);
  mtp_chain(queries, kv, drafts.data(), logits);
}

void DeepseekModel::mtp_chain(std::span<const DraftQuery> queries, const KvCacheView& kv, int32_t* drafts,
                              float* first_logits) {
  const ModelConfig& c = config_;
  const LayerWeights& L = weights_->mtp->block;
  const int64_t d = c.hidden_size, vocab = c.vocab_size, nq = int64_t(queries.size());
  const float eps = float(c.rms_norm_eps);
  const int bs = kv.block_size;
  const size_t entry_bytes = cache_layout(kv.dtype).bytes_per_token();

  // A private copy of each query's entries, shifted by one: its position t holds slot t + 1, so
  // the attention kernel's positions [0, t] are exactly the pairs 0 .. t (slot 0 holds none).
  // Each query's drafts then write their own entries after them.
  std::vector<size_t> first_block(static_cast<size_t>(nq)), first_draft(static_cast<size_t>(nq));
  size_t n_blocks = 0, n_drafts = 0;
  int max_drafts = 0;
  for (int64_t i = 0; i < nq; ++i) {
    const DraftQuery& q = queries[size_t(i)];
    DI_CHECK(q.n_ctx >= 1 && q.n_drafts >= 1);
    first_block[size_t(i)] = n_blocks;
    first_draft[size_t(i)] = n_drafts;
    n_blocks += size_t((q.n_ctx - 1 + q.n_drafts + bs - 1) / bs);
    n_drafts += size_t(q.n_drafts);
    max_drafts = std::max(max_drafts, q.n_drafts);
  }
  uint8_t* cache = sized(s_.m_cache, n_blocks * size_t(bs) * entry_bytes);
  int32_t* tables = sized(s_.m_tables, n_blocks);
  for (size_t k = 0; k < n_blocks; ++k) tables[k] = int32_t(k);
  float* h = sized(s_.m_prev, size_t(nq * d));  // per query: the h of its next pair
  int32_t* tokens = sized(s_.m_tokens, size_t(nq));
  for (int64_t i = 0; i < nq; ++i) {
    const DraftQuery& q = queries[size_t(i)];
    for (int32_t t = 0; t + 1 < q.n_ctx; ++t) {
      const int32_t block = q.block_tables[kMtpLatent][(t + 1) / bs];
      DI_CHECK(block >= 0);
      std::memcpy(cache + ((first_block[size_t(i)] + size_t(t / bs)) * size_t(bs) + size_t(t % bs)) * entry_bytes,
                  kv.kinds[kMtpLatent].block(0, block) + size_t((t + 1) % bs) * entry_bytes, entry_bytes);
    }
    std::memcpy(h + i * d, hidden_slot(kv, q.block_tables[kMtpHidden], q.n_ctx - 1, d), size_t(d) * sizeof(float));
    tokens[i] = q.token;
  }

  std::vector<int32_t> rows;  // the queries drafting at step j, as this step's batch rows
  for (int j = 0; j < max_drafts; ++j) {
    rows.clear();
    for (int64_t i = 0; i < nq; ++i)
      if (queries[size_t(i)].n_drafts > j) rows.push_back(int32_t(i));
    const int64_t n = int64_t(rows.size());
    ForwardBatch fb;
    float* h_rows = sized(s_.m_rows, size_t(n * d));
    for (int64_t r = 0; r < n; ++r) {
      const int32_t i = rows[size_t(r)];
      const int32_t pos = queries[size_t(i)].n_ctx - 1 + j;  // the pair's index, its RoPE position
      fb.token_ids.push_back(tokens[i]);
      fb.positions.push_back(pos);
      BatchSequence s{int32_t(r), 1, pos + 1, {}};
      s.block_tables[0] = tables + first_block[size_t(i)];
      fb.seqs.push_back(s);
      fb.logit_rows.push_back(int32_t(r));
      std::memcpy(h_rows + r * d, h + int64_t(i) * d, size_t(d) * sizeof(float));
    }
    float* x = sized(s_.m_x, size_t(n * d));
    float* hn = sized(s_.m_hn, size_t(n * d));
    float* tmp = sized(s_.m_tmp, size_t(n * d));
    mtp_input(fb.token_ids.data(), h_rows, n, x);
    backend_.rms_norm({x, d, hn, d, n, d, L.input_norm.data(), eps});
    attention(L.attn, fb, cache, kv.dtype, bs, 0, hn, tmp);
    add_into(x, tmp, size_t(n * d));
    backend_.rms_norm({x, d, hn, d, n, d, L.post_attn_norm.data(), eps});
    ffn(L, hn, n, tmp);
    add_into(x, tmp, size_t(n * d));
    backend_.rms_norm({x, d, hn, d, n, d, weights_->mtp->head_norm.data(), eps});
    float* logits = sized(s_.m_logits, size_t(n * vocab));
    backend_.linear({hn, d, n, &weights_->mtp->head, logits, vocab});
    for (int64_t r = 0; r < n; ++r) {
      const int32_t i = rows[size_t(r)];
      const float* row = logits + r * vocab;
      const int32_t best = int32_t(std::max_element(row, row + vocab) - row);  // lowest id on ties
      drafts[first_draft[size_t(i)] + size_t(j)] = best;
      tokens[i] = best;
      std::memcpy(h + int64_t(i) * d, x + r * d, size_t(d) * sizeof(float));  // the layer's output, before its norm
      if (j == 0 && first_logits) std::copy_n(row, vocab, first_logits + int64_t(i) * vocab);
    }
  }
}

Result<std::vector<float>> deepseek_mtp_probe_logits(DeepseekModel& model, const std::vector<int32_t>& ids) {
  const ModelConfig& c = model.config();
  if (!model.can_draft()) return Status::Error("the MTP probe needs the model loaded for drafting (an MTP layer)");
  if (ids.size() < 2) return Status::Error("the MTP probe needs at least 2 token ids, got " + std::to_string(ids.size()));
  for (int32_t id : ids)
    if (id < 0 || id >= c.vocab_size)
      return Status::Error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                           std::to_string(c.vocab_size) + ")");
  const int32_t n = int32_t(ids.size() - 1);  // pairs t = 0 .. L-2
  if (n > c.max_position_embeddings)
    return Status::Error(std::to_string(ids.size()) + " token ids exceed max_position_embeddings " +
                         std::to_string(c.max_position_embeddings));

  // One sequence in one step over positions 0 .. n-1: every kind gets blocks 0 .. n_blocks-1.
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
    for (int s = 0; s < kinds[k].n_slabs; ++s)
      v.slab_base.push_back(memory.emplace_back(kinds[k].bytes_per_block * size_t(n_blocks)).data());
    seq.block_tables[k] = table.data();
  }
  ForwardBatch b;
  b.seqs = {seq};
  b.token_ids.assign(ids.begin(), ids.end() - 1);
  for (int32_t t = 0; t < n; ++t) b.positions.push_back(t);
  b.logit_rows = {n - 1};
  std::vector<float> main_logits(size_t(c.vocab_size));
  model.forward(b, view, main_logits.data());

  std::vector<DraftQuery> queries;
  for (int32_t t = 0; t < n; ++t) {
    DraftQuery q{t + 1, ids[size_t(t) + 1], 1, {}};
    for (size_t k = 0; k < kinds.size(); ++k) q.block_tables[k] = table.data();
    queries.push_back(q);
  }
  std::vector<float> logits(size_t(n) * size_t(c.vocab_size));
  model.draft_logits(queries, view, logits.data());
  return logits;
}

}  // namespace deepinfer
