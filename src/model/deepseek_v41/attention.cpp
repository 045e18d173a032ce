// DeepseekV41Model's attention sublayer: window K=V, compression at KV sources, the two-level
// indexer, and sink attention over the window plus the selected entries (model.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/aligned_vector.h"
#include "core/check.h"
#include "model/deepseek_v4/indexer.h"
#include "model/deepseek_v41/model.h"
#include "model/for_each_row.h"
#include "model/scratch.h"

namespace deepinfer {
namespace {

struct RowScratch {  // per-thread buffers of one row
  std::vector<float> keys, scores, dots, index_keys;
  std::vector<int32_t> selected, order;
  std::vector<const void*> key_rows;
  AlignedVector<uint16_t> keys_bf16;  // [ceil(n_keys / 16) * 16][ld]: SinkAttentionParams::keys_bf16
};

// Under bf16 dots, sequences with this many rows or more load their keys once per layer
// (key_table); the compressed entries their rows choose, beyond kMaxTabledEntries, per row.
constexpr int kTabledRows = 16;
constexpr size_t kMaxTabledEntries = 16384;

// e2m1 keys and queries (the trained formats) are exact in bf16, so their scores run as bf16 dot
// products (Backend::indexer_scores, on the cached keys in place) with the same products as in
// f32; f32 keys stay in f32.
bool scores_in_bf16(const V41KvLayout& l) {
  return l.key_format == V41KvFormat::kFp4Ue8m0Block32 && l.query_format == l.key_format;
}

RowScratch& row_scratch() {
  thread_local RowScratch s;
  return s;
}

// The candidate blocks' entries, ascending: blocks of `block` entries ranked by their best
// score, the block of the newest entry always kept, the top `n_blocks` (ties to the lower block).
void candidate_entries(const std::vector<float>& scores, int n_entries, int block, int n_blocks,
                       std::vector<int32_t>& out, std::vector<int32_t>& order) {
  const int total = (n_entries + block - 1) / block;
  out.clear();
  if (total <= n_blocks) {
    out.resize(size_t(n_entries));
    std::iota(out.begin(), out.end(), 0);
    return;
  }
  std::vector<float> best(size_t(total), -INFINITY);
  for (int e = 0; e < n_entries; ++e) best[size_t(e / block)] = std::max(best[size_t(e / block)], scores[size_t(e)]);
  best[size_t(total - 1)] = INFINITY;
  order.resize(size_t(total));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + n_blocks, order.end(), [&](int32_t a, int32_t b) {
    return best[size_t(a)] > best[size_t(b)] || (best[size_t(a)] == best[size_t(b)] && a < b);
  });
  std::sort(order.begin(), order.begin() + n_blocks);
  for (int i = 0; i < n_blocks; ++i)
    for (int e = order[size_t(i)] * block; e < std::min(n_entries, (order[size_t(i)] + 1) * block); ++e) out.push_back(e);
}

}  // namespace

void DeepseekV41Model::compress(int layer, const ForwardBatch& b, const KvCacheView& kv, const float* xn) {
  const DeepseekV41Config& c = config_;
  const V41AttentionWeights& a = weights_->layers[size_t(layer)].attn;
  const CompressorWeights& w = a.compressor;
  const int64_t n = int64_t(b.n_rows()), hd = c.head_dim, ihd = c.index_head_dim;
  const int r = w.ratio, rd = c.qk_rope_head_dim;
  const float eps = float(c.rms_norm_eps);
  float* ckv = sized(s_.ckv, size_t(n * hd));
  float* cscore = sized(s_.cscore, size_t(n * hd));
  compressor_token_inputs(backend_, w, xn, c.hidden_size, n, b.positions.data(), ckv, cscore);
  if (r > 1)
#pragma omp parallel for if (n > 1)
    for (int64_t i = 0; i < n; ++i) {
      uint8_t* g = layout_.group_inputs(kv, b.seqs[size_t(s_.row_seq[size_t(i)])], layer, b.positions[size_t(i)]);
      std::memcpy(g, ckv + i * hd, size_t(hd) * 4);
      std::memcpy(g + hd * 4, cscore + i * hd, size_t(hd) * 4);
    }
  // Rows that complete a group pool it (from the cached inputs: a group split across steps pools
  // the same values), then norm -> latent; entry = rope(latent), key = rope(k_norm(wk latent)).
  s_.group_rows.clear();
  for (int64_t i = 0; i < n; ++i)
    if ((b.positions[size_t(i)] + 1) % r == 0) s_.group_rows.push_back(int32_t(i));
  const int64_t m = int64_t(s_.group_rows.size());
  float* latent = sized(s_.latent, size_t(m * hd));
  int32_t* gpos = sized(s_.group_pos, size_t(m));
#pragma omp parallel for if (m > 1)
  for (int64_t j = 0; j < m; ++j) {
    const int32_t i = s_.group_rows[size_t(j)], p = b.positions[size_t(i)];
    gpos[j] = p + 1 - r;  // the group's first position: where its entry and key are rotated
    if (r == 1) {
      std::copy_n(ckv + int64_t(i) * hd, hd, latent + j * hd);
      continue;
    }
    const BatchSequence& s = b.seqs[size_t(s_.row_seq[size_t(i)])];
    std::vector<float> tkv(size_t(r * hd)), tscore(size_t(r * hd));
    for (int t = 0; t < r; ++t) {
      const uint8_t* g = layout_.group_inputs(kv, s, layer, gpos[j] + t);
      std::memcpy(tkv.data() + t * hd, g, size_t(hd) * 4);
      std::memcpy(tscore.data() + t * hd, g + hd * 4, size_t(hd) * 4);
    }
    compressor_pool(w, tkv.data(), tscore.data(), 0, latent + j * hd);
  }
  if (m > 0) {
    backend_.rms_norm({latent, hd, latent, hd, m, hd, w.norm.data(), eps});
    float* key = sized(s_.ikey, size_t(m * ihd));
    backend_.linear({latent, hd, m, &a.index_wk, key, ihd});
    backend_.rms_norm({key, ihd, key, ihd, m, ihd, a.index_k_norm.data(), eps});
    backend_.rope({key + ihd - rd, ihd, 0, m, 1, rd, gpos, compress_inv_freq_.data(), 1.0f});
    backend_.rope({latent + hd - rd, hd, 0, m, 1, rd, gpos, compress_inv_freq_.data(), 1.0f});
#pragma omp parallel for if (m > 1)
    for (int64_t j = 0; j < m; ++j) {
      const int32_t i = s_.group_rows[size_t(j)];
      uint8_t* e = layout_.compressed_entry(kv, b.seqs[size_t(s_.row_seq[size_t(i)])], layer, gpos[j] / r);
      v41_kv_store(layout_.entry_format, latent + j * hd, int(hd), e);
      v41_kv_store(layout_.key_format, key + j * ihd, int(ihd), e + layout_.entry_bytes);
    }
  }
  // Every sequence's indexer keys for this source and the layers re-indexing it: where the cache
  // holds them (e2m1, scored in bf16 products), else dequantized (the attention reads only the
  // selected entries, from the cache).
  const bool bf16 = scores_in_bf16(layout_);
  const size_t per_key = bf16 ? 1 : size_t(ihd);  // key_offset's unit: rows, or f32 elements
  s_.key_offset.assign(b.seqs.size() + 1, 0);
  for (size_t si = 0; si < b.seqs.size(); ++si)
    s_.key_offset[si + 1] = s_.key_offset[si] + size_t(b.seqs[si].n_ctx / r) * per_key;
  if (bf16) sized(s_.key_rows, s_.key_offset.back());
  else sized(s_.keys, s_.key_offset.back());
#pragma omp parallel for schedule(dynamic, 1) if (b.seqs.size() > 1)
  for (size_t si = 0; si < b.seqs.size(); ++si) {
    const BatchSequence& s = b.seqs[si];
    for (int g = 0; g < s.n_ctx / r; ++g) {
      const uint8_t* src = layout_.compressed_entry(kv, s, layer, g) + layout_.entry_bytes;
      const size_t at = s_.key_offset[si] + size_t(g) * per_key;
      if (bf16) s_.key_rows[at] = src;
      else v41_kv_load(layout_.key_format, src, int(ihd), s_.keys.data() + at);
    }
  }
}

void DeepseekV41Model::index(int layer, const ForwardBatch& b, const float* xn, const float* qr) {
  const DeepseekV41Config& c = config_;
  const IndexerWeights& ix = weights_->layers[size_t(layer)].attn.indexer;
  const int64_t n = int64_t(b.n_rows()), IH = ix.n_heads, ihd = ix.head_dim;
  const int rd = c.qk_rope_head_dim, r = c.compress_ratio(layer);
  float* iq = sized(s_.iq, size_t(n * IH * ihd));
  backend_.linear({qr, c.q_lora_rank, n, &ix.wq_b, iq, IH * ihd});
  backend_.rope({iq + ihd - rd, IH * ihd, ihd, n, int(IH), rd, b.positions.data(), compress_inv_freq_.data(), 1.0f});
#pragma omp parallel for if (n > 1)
  for (int64_t h = 0; h < n * IH; ++h) v41_fake_quant(layout_.query_format, iq + h * ihd, int(ihd));
  float* iw = sized(s_.iw, size_t(n * IH));
  backend_.linear({xn, c.hidden_size, n, &ix.weights_proj, iw, IH});
  const bool candidate_source = layer == c.candidate_source_layer_id;
  const bool in_candidates = c.candidate_source_layer_id >= 0 && layer > c.candidate_source_layer_id &&
                             c.kv_source_of(layer) == c.kv_source_of(c.candidate_source_layer_id);
  const bool bf16 = scores_in_bf16(layout_);
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
  for (int64_t i = 0; i < n; ++i) {
    const int si = s_.row_seq[size_t(i)];
    const int n_visible = (b.positions[size_t(i)] + 1) / r;
    const float* keys = bf16 ? nullptr : s_.keys.data() + s_.key_offset[size_t(si)];
    const void* const* rows = bf16 ? s_.key_rows.data() + s_.key_offset[size_t(si)] : nullptr;
    const float* q = iq + i * IH * ihd;
    const float* w = iw + i * IH;
    RowScratch& rs = row_scratch();
    std::vector<int32_t>& sel = s_.selected[size_t(i)];
    if (candidate_source) {
      const int n_blocks = (n_visible + c.candidate_block_size - 1) / c.candidate_block_size;
      if (n_blocks > c.candidate_topk_blocks) {
        if (bf16) indexer_scores_bf16(backend_, ix, q, w, rows, DType::F4_E2M1, n_visible, rs.dots, rs.scores);
        else indexer_scores(backend_, ix, q, w, keys, n_visible, rs.dots, rs.scores);
      }
      candidate_entries(rs.scores, n_visible, c.candidate_block_size, c.candidate_topk_blocks, s_.candidates[size_t(i)],
                        rs.order);
    }
    const std::vector<int32_t>& cand = s_.candidates[size_t(i)];
    if (in_candidates && !cand.empty()) {  // score only inside the candidate blocks
      int32_t* picked = sized(rs.selected, cand.size());
      int k = 0;
      if (bf16) {
        const void** ck = sized(rs.key_rows, cand.size());
        for (size_t j = 0; j < cand.size(); ++j) ck[j] = rows[cand[j]];
        k = indexer_select_bf16(backend_, ix, q, w, ck, DType::F4_E2M1, int(cand.size()), picked, rs.dots, rs.scores);
      } else {
        float* ck = sized(rs.index_keys, cand.size() * size_t(ihd));
        for (size_t j = 0; j < cand.size(); ++j) std::copy_n(keys + size_t(cand[j]) * size_t(ihd), ihd, ck + j * size_t(ihd));
        k = indexer_select(backend_, ix, q, w, ck, int(cand.size()), picked, rs.dots, rs.scores);
      }
      sel.resize(size_t(k));
      for (int j = 0; j < k; ++j) sel[size_t(j)] = cand[size_t(picked[j])];
    } else {
      sel.resize(size_t(n_visible));
      sel.resize(size_t(bf16 ? indexer_select_bf16(backend_, ix, q, w, rows, DType::F4_E2M1, n_visible, sel.data(), rs.dots,
                                                   rs.scores)
                             : indexer_select(backend_, ix, q, w, keys, n_visible, sel.data(), rs.dots, rs.scores)));
    }
  }
}

void DeepseekV41Model::key_table(int layer, const ForwardBatch& b, const KvCacheView& kv, size_t si, int ld) {
  const DeepseekV41Config& c = config_;
  const int ratio = weights_->layers[size_t(layer)].attn.compress_ratio, source = c.kv_source_of(layer);
  const int hd = int(c.head_dim);
  const BatchSequence& s = b.seqs[si];
  SeqKeyTable& tab = s_.key_table;
  const int32_t p0 = b.positions[size_t(s.row_begin)], p1 = b.positions[size_t(s.row_begin + s.n_new - 1)];
  DI_CHECK(p1 - p0 == s.n_new - 1);  // the rows' positions run on, so each row's window lies in the table's
  tab.window_first = std::max(0, p0 - c.sliding_window + 1);
  const int n_window = p1 - tab.window_first + 1;
  sized(tab.window, size_t(n_window) * size_t(ld));
#pragma omp parallel for schedule(static)
  for (int t = 0; t < n_window; ++t)
    v41_kv_load_bf16(layout_.window_format, layout_.window_entry(kv, s, layer, tab.window_first + t), hd,
                     tab.window.data() + size_t(t) * ld, ld);
  tab.n_entries = 0;
  if (ratio == 0) return;
  tab.entry_row.assign(size_t((p1 + 1) / ratio), -1);
  tab.entry_ids.clear();
  for (int i = s.row_begin; i < s.row_begin + s.n_new; ++i)
    for (int32_t g : s_.selected[size_t(i)]) {
      DI_CHECK(source >= 0 && g >= 0 && size_t(g) < tab.entry_row.size());
      if (tab.entry_row[size_t(g)] < 0) {
        tab.entry_row[size_t(g)] = int32_t(tab.entry_ids.size());
        tab.entry_ids.push_back(g);
      }
    }
  if (tab.entry_ids.size() > kMaxTabledEntries) return;
  tab.n_entries = tab.entry_ids.size();
  sized(tab.entries, tab.n_entries * size_t(ld));
#pragma omp parallel for schedule(static)
  for (size_t e = 0; e < tab.n_entries; ++e)
    v41_kv_load_bf16(layout_.entry_format, layout_.compressed_entry(kv, s, source, tab.entry_ids[e]), hd,
                     tab.entries.data() + e * ld, ld);
}

void DeepseekV41Model::attention(int layer, const ForwardBatch& b, const KvCacheView& kv, const float* xn,
                                 float* out) {
  const DeepseekV41Config& c = config_;
  const V41AttentionWeights& a = weights_->layers[size_t(layer)].attn;
  const int64_t n = int64_t(b.n_rows()), d = c.hidden_size, H = c.num_attention_heads, hd = c.head_dim;
  const int rd = c.qk_rope_head_dim, ratio = a.compress_ratio, source = c.kv_source_of(layer);
  const float eps = float(c.rms_norm_eps);
  const float* inv_freq = ratio > 0 ? compress_inv_freq_.data() : window_inv_freq_.data();
  const int32_t* pos = b.positions.data();

  float* qr = sized(s_.qr, size_t(n * c.q_lora_rank));
  backend_.linear({xn, d, n, &a.wq_a, qr, c.q_lora_rank});
  backend_.rms_norm({qr, c.q_lora_rank, qr, c.q_lora_rank, n, c.q_lora_rank, a.q_norm.data(), eps});
  float* q = sized(s_.q, size_t(n * H * hd));
  backend_.linear({qr, c.q_lora_rank, n, &a.wq_b, q, H * hd});
  backend_.rope({q + hd - rd, H * hd, hd, n, int(H), rd, pos, inv_freq, 1.0f});
  float* kvr = sized(s_.kv, size_t(n * hd));
  backend_.linear({xn, d, n, &a.wkv, kvr, hd});
  backend_.rms_norm({kvr, hd, kvr, hd, n, hd, a.kv_norm.data(), eps});
  backend_.rope({kvr + hd - rd, hd, 0, n, 1, rd, pos, inv_freq, 1.0f});
#pragma omp parallel for if (n > 1)
  for (int64_t i = 0; i < n; ++i)
    v41_kv_store(layout_.window_format, kvr + i * hd, int(hd),
                 layout_.window_entry(kv, b.seqs[size_t(s_.row_seq[size_t(i)])], layer, pos[i]));
  if (a.kv_source) compress(layer, b, kv, xn);
  if (a.index_source) index(layer, b, xn, qr);

  float* o = sized(s_.o, size_t(n * H * hd));
  const float scale = float(1.0 / std::sqrt(double(hd)));
  // Under bf16 activations over the published cache formats (exact in bf16) the attention's dot
  // products are bf16 ones (SinkAttentionParams' BF16); over f32 entries, f32.
  const bool bf16_dots = info_.activation_dtype == DType::BF16 && layout_.window_format != V41KvFormat::kF32 &&
                         (ratio == 0 || layout_.entry_format != V41KvFormat::kF32);
  const int ld = int((hd + 31) / 32 * 32);
  // Row i's attention; under bf16 dots with the keys from tab (its sequence's) where given.
  const auto attend_row = [&](int64_t i, const SeqKeyTable* tab) {
    const int si = s_.row_seq[size_t(i)];
    const BatchSequence& s = b.seqs[size_t(si)];
    const int32_t p = pos[i];
    const int32_t first = std::max(0, p - c.sliding_window + 1);
    const int n_window = p - first + 1;
    const std::vector<int32_t>* sel = ratio > 0 ? &s_.selected[size_t(i)] : nullptr;
    const int n_selected = sel ? int(sel->size()) : 0;
    RowScratch& rs = row_scratch();
    if (bf16_dots) {  // the keys in bf16, from its sequence's table or loaded here
      const int n_keys = n_window + n_selected, n_pad = (n_keys + 15) / 16 * 16;
      uint16_t* kb = sized(rs.keys_bf16, size_t(n_pad) * size_t(ld));
      if (tab)
        std::memcpy(kb, tab->window.data() + size_t(first - tab->window_first) * size_t(ld), size_t(n_window) * ld * 2);
      else
        for (int t = 0; t < n_window; ++t)
          v41_kv_load_bf16(layout_.window_format, layout_.window_entry(kv, s, layer, first + t), int(hd),
                           kb + size_t(t) * ld, ld);
      for (int j = 0; j < n_selected; ++j) {
        const int32_t g = (*sel)[size_t(j)];
        DI_CHECK(source >= 0 && g < (p + 1) / ratio);
        uint16_t* dst = kb + size_t(n_window + j) * ld;
        if (tab && tab->n_entries)
          std::memcpy(dst, tab->entries.data() + size_t(tab->entry_row[size_t(g)]) * ld, size_t(ld) * 2);
        else
          v41_kv_load_bf16(layout_.entry_format, layout_.compressed_entry(kv, s, source, g), int(hd), dst, ld);
      }
      std::fill(kb + size_t(n_keys) * ld, kb + size_t(n_pad) * ld, uint16_t(0));
      SinkAttentionParams sp{q + i * H * hd, nullptr, a.sink.data(), o + i * H * hd, int(H), int(hd), n_keys, scale,
                             DType::BF16};
      sp.keys_bf16 = kb;
      sp.keys_bf16_ld = ld;
      backend_.sink_attention(sp);
      return;
    }
    float* keys = sized(rs.keys, size_t(n_window + n_selected) * size_t(hd));
    for (int t = 0; t < n_window; ++t)
      v41_kv_load(layout_.window_format, layout_.window_entry(kv, s, layer, first + t), int(hd), keys + t * hd);
    for (int j = 0; j < n_selected; ++j) {
      const int32_t g = (*sel)[size_t(j)];
      DI_CHECK(source >= 0 && g < (p + 1) / ratio);
      v41_kv_load(layout_.entry_format, layout_.compressed_entry(kv, s, source, g), int(hd), keys + (n_window + j) * hd);
    }
    backend_.sink_attention({q + i * H * hd, keys, a.sink.data(), o + i * H * hd, int(H), int(hd), n_window + n_selected,
                             scale, DType::F32});
  };
  // Under bf16 dots a sequence of kTabledRows rows or more loads its keys once (key_table) and
  // then runs its rows; the other rows run together after.
  s_.plain_rows.clear();
  for (size_t si = 0; si < b.seqs.size(); ++si) {
    const BatchSequence& s = b.seqs[si];
    if (bf16_dots && s.n_new >= kTabledRows) {
      key_table(layer, b, kv, si, ld);
      for_each_row(s.n_new, [&](int64_t r) { attend_row(s.row_begin + r, &s_.key_table); });
    } else {
      for (int r = 0; r < s.n_new; ++r) s_.plain_rows.push_back(s.row_begin + r);
    }
  }
  for_each_row(int64_t(s_.plain_rows.size()), [&](int64_t k) { attend_row(s_.plain_rows[size_t(k)], nullptr); });
  int32_t* neg = sized(s_.neg_positions, size_t(n));
  for (int64_t i = 0; i < n; ++i) neg[i] = -pos[i];
  backend_.rope({o + hd - rd, H * hd, hd, n, int(H), rd, neg, inv_freq, 1.0f});  // RoPE by -position

  const int64_t G = c.o_groups, o_lora = c.o_lora_rank, group_in = H * hd / G;
  float* og = sized(s_.og, size_t(n * G * o_lora));
  for (int64_t g = 0; g < G; ++g)
    backend_.linear({o + g * group_in, H * hd, n, &a.wo_a[size_t(g)], og + g * o_lora, G * o_lora});
  backend_.linear({og, G * o_lora, n, &a.wo_b, out, d});
}

}  // namespace deepinfer
