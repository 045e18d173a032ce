// Expanded MLA attention over one chunk of a sequence's positions (ExpandedChunk), written once
// over a SIMD traits type V (simd_*.h) and instantiated per ISA by kernels_<isa>.cpp.
//
// The chunk's expanded keys are packed per head transposed, keys in lanes ([key group][d][lanes]:
// one vector holds one dimension of kW keys), so a score vector is a chain of broadcast-query
// FMAs with no horizontal sum; values stay row-major. With dot BF16 where V has bf16 pair dots
// (Bf16PairDots), both are bf16 pairs instead (keys [group of 16][d / 2][16][2], values
// [key / 2][column][2]); elsewhere BF16 rounds queries, keys, values and weights to bf16 and
// multiplies them in f32. Keys and values are per head, contiguous over positions, padded with
// zeros to whole kAttendKeyBlock blocks. Tasks are (up to 4 consecutive rows, 1 head). Per absolute key block a row reaches: scores of
// the whole block, an online-softmax update over the row's own keys [t0, position], the weights
// past them set to 0, and acc = acc * alpha + sum over the whole block of p[t] * v[t]. Every row
// thus runs the same operations over the same absolute blocks whatever its neighbours or chunk,
// and a block none of a tile's rows reaches adds nothing to them.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/aligned_vector.h"
#include "core/dtype.h"
#include "kernels/cpu/gemm_kernels.h"
#include "kernels/cpu/bf16_pair_dots.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/mla_attention_kernels.h"
#include "kernels/ops.h"

namespace deepinfer::cpu {
namespace {

// Keys per packed group: the vector width, or 16 (a 512-bit vector of pairs) for pair dots.
template <class V>
constexpr int expanded_key_group() {
  return Bf16PairDots<V>::kEnabled ? 16 : V::kW;
}

template <class V>
void expanded_pack(const ExpandedChunk& ch, int n_pad) {
  const MlaExpandedAttentionParams& p = *ch.p;
  ExpandedState& st = *ch.state;
  const int H = p.n_heads, dn = p.qk_nope_head_dim, dv = p.v_head_dim, rd = p.layout.qk_rope_head_dim;
  const int dq = dn + rd, n_pairs = (dq + 1) / 2;
  const int64_t ld_kv = int64_t(H) * (dn + dv);
  const bool bf16 = p.dot_dtype == DType::BF16;
  const bool pairs = bf16 && Bf16PairDots<V>::kEnabled;
  constexpr int G = expanded_key_group<V>();
  const int n_groups = n_pad / G;
  if (pairs) {
    st.keys_bf16.resize(size_t(H) * n_groups * n_pairs * G * 2);
    st.value_pairs.resize(size_t(n_pad) * H * dv);
  } else {
    st.keys.resize(size_t(H) * n_groups * dq * G);
    st.values.resize(size_t(n_pad) * H * dv);
  }
  auto round = [&](float x) { return bf16 ? bf16_to_f32(f32_to_bf16(x)) : x; };
#pragma omp parallel for schedule(static)
  for (int t = 0; t < n_pad; ++t) {
    const bool valid = t < ch.n_keys;
    const float* kv = ch.kv + int64_t(valid ? t : 0) * ld_kv;
    const float* pe = ch.k_pe + size_t(valid ? t : 0) * rd;
    const int g = t / G, lane = t % G;
    for (int h = 0; h < H; ++h) {
      const float* k_src = kv + int64_t(h) * (dn + dv);
      const float* v_src = k_src + dn;
      auto key = [&](int d) { return !valid || d >= dq ? 0.0f : d < dn ? k_src[d] : pe[d - dn]; };
      if (pairs) {
        uint16_t* dst = st.keys_bf16.data() + ((size_t(h) * n_groups + g) * n_pairs) * G * 2 + size_t(lane) * 2;
        for (int d = 0; d < 2 * n_pairs; ++d) dst[size_t(d / 2) * G * 2 + d % 2] = f32_to_bf16(key(d));
        uint16_t* vd = st.value_pairs.data() + ((size_t(h) * (n_pad / 2) + t / 2) * dv) * 2 + size_t(t % 2);
        for (int j = 0; j < dv; ++j) vd[2 * j] = valid ? f32_to_bf16(v_src[j]) : uint16_t(0);
      } else {
        float* dst = st.keys.data() + ((size_t(h) * n_groups + g) * dq) * G + size_t(lane);
        for (int d = 0; d < dq; ++d) dst[size_t(d) * G] = round(key(d));
        float* vd = st.values.data() + (size_t(h) * n_pad + t) * dv;
        for (int j = 0; j < dv; ++j) vd[j] = valid ? round(v_src[j]) : 0.0f;
      }
    }
  }
}

// scores[i][t] = scale * q_i . keys[t] for 4 query rows (f32, [dq]) and the block's T keys packed
// [T / kW][dq][kW] (keys in lanes), a chain of FMAs over d from zero per (row, key).
template <class V>
void expanded_scores(const float* const* q, const float* keys, int dq, float scale, float* scores, int n_hb) {
  using F = typename V::F;
  constexpr int T = kAttendKeyBlock, NG = T / V::kW, GB = NG < 4 ? NG : 4;
  for (int g0 = 0; g0 < NG; g0 += GB) {
    F acc[4][GB];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < GB; ++j) acc[i][j] = V::zero();
    const float* kg = keys + size_t(g0) * dq * V::kW;
    for (int d = 0; d < dq; ++d) {
      F kv[GB];
#pragma GCC unroll 4
      for (int j = 0; j < GB; ++j) kv[j] = V::load(kg + (size_t(j) * dq + d) * V::kW);
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        const F qv = V::bcast(q[i][d]);
#pragma GCC unroll 4
        for (int j = 0; j < GB; ++j) acc[i][j] = V::fma(qv, kv[j], acc[i][j]);
      }
    }
    const F sc = V::bcast(scale);
    for (int i = 0; i < n_hb; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < GB; ++j) V::store(scores + size_t(i) * T + size_t(g0 + j) * V::kW, V::mul(acc[i][j], sc));
  }
}

// Rows [r0, r0 + nr) of the sequence (nr <= 4), head h, over the chunk's n_pad keys.
template <class V>
void expanded_attend_task(const ExpandedChunk& ch, int n_pad, int r0, int nr, int h, float* scores) {
  using F = typename V::F;
  constexpr int T = kAttendKeyBlock, G = expanded_key_group<V>();
  const MlaExpandedAttentionParams& p = *ch.p;
  ExpandedState& st = *ch.state;
  const int H = p.n_heads, dn = p.qk_nope_head_dim, dv = p.v_head_dim, rd = p.layout.qk_rope_head_dim;
  const int dq = dn + rd, n_pairs = (dq + 1) / 2, n_groups = n_pad / G;
  const bool bf16 = p.dot_dtype == DType::BF16;
  constexpr bool kPairs = Bf16PairDots<V>::kEnabled;
  const int64_t row0 = ch.seq->row_begin;
  int32_t pos[4];
  for (int i = 0; i < nr; ++i) pos[i] = p.batch->positions[size_t(row0 + r0 + i)];

  for (int b0 = 0; b0 < n_pad; b0 += T) {
    const int32_t t0 = ch.key_begin + b0;
    int iv = 0;  // rows [iv, nr) reach this block (positions ascend)
    while (iv < nr && pos[iv] < t0) ++iv;
    if (iv == nr) break;
    const int n_hb = nr - iv;
    auto tile_row = [&](int i) { return r0 + iv + std::min(i, n_hb - 1); };  // short tiles repeat their last row

    // Scores of the whole block.
    bool scored = false;
    if constexpr (kPairs) {
      if (bf16) {
        const uint16_t* q[4];
        for (int i = 0; i < 4; ++i) q[i] = st.q_bf16.data() + (size_t(tile_row(i)) * H + h) * n_pairs * 2;
        Bf16PairDots<V>::scores(q, st.keys_bf16.data() + ((size_t(h) * n_groups + b0 / G) * n_pairs) * G * 2,
                                n_pairs, p.softmax_scale, scores, n_hb);
        scored = true;
      }
    }
    if (!scored) {
      const float* q[4];
      for (int i = 0; i < 4; ++i)
        q[i] = bf16 ? st.q_round.data() + (size_t(tile_row(i)) * H + h) * dq
                    : p.q + (row0 + tile_row(i)) * p.ld_q + int64_t(h) * p.ld_q_head;
      expanded_scores<V>(q, st.keys.data() + ((size_t(h) * n_groups + b0 / G) * dq) * G, dq, p.softmax_scale, scores,
                         n_hb);
    }
    // Online softmax over each row's own keys of the block; the weights past them are 0.
    float alpha[4];
    for (int i = 0; i < n_hb; ++i) {
      const int r = r0 + iv + i;
      const int n_t = std::min<int32_t>(T, pos[iv + i] + 1 - t0);
      float* sc = scores + size_t(i) * T;
      alpha[i] = softmax_block_update<V>(sc, n_t, st.run_max[size_t(r) * H + h], st.run_sum[size_t(r) * H + h]);
      std::fill(sc + n_t, sc + T, 0.0f);
    }

    // Values over the whole block.
    float* o[4];
    for (int i = 0; i < 4; ++i) o[i] = st.acc.data() + (size_t(tile_row(i)) * H + h) * dv;
    if constexpr (kPairs) {
      if (bf16) {
        alignas(64) uint16_t pb[4][T];
        const uint16_t* pr[4];
        for (int i = 0; i < n_hb; ++i) round_to_bf16<V>(scores + size_t(i) * T, pb[i], T);
        for (int i = 0; i < 4; ++i) pr[i] = pb[std::min(i, n_hb - 1)];
        const float al[4] = {alpha[0], alpha[std::min(1, n_hb - 1)], alpha[std::min(2, n_hb - 1)],
                             alpha[std::min(3, n_hb - 1)]};
        Bf16PairDots<V>::accumulate(pr, st.value_pairs.data() + (size_t(h) * (n_pad / 2) + b0 / 2) * dv * 2,
                                    int64_t(dv) * 2, dv, T / 2, o, al, n_hb);
        continue;
      }
    }
    if (bf16)  // the weights rounded to bf16, as the pair dots would take them
      for (int i = 0; i < n_hb; ++i) round_weights_to_bf16(scores + size_t(i) * T, T);
    const float* pr[4];
    F al[4];
    for (int i = 0; i < 4; ++i) {
      pr[i] = scores + size_t(std::min(i, n_hb - 1)) * T;
      al[i] = V::bcast(alpha[std::min(i, n_hb - 1)]);
    }
    const float* vals = st.values.data() + (size_t(h) * n_pad + b0) * dv;
    for (int cb = 0; cb < dv; cb += kValueCols<V>) {
      if (dv - cb >= kValueCols<V>)
        accumulate_values<V, true>(vals, dv, T, cb, kValueCols<V>, pr, o, al, n_hb);
      else
        accumulate_values<V, false>(vals, dv, T, cb, dv - cb, pr, o, al, n_hb);
    }
  }
}

template <class V>
void mla_expanded_attend_chunk(const ExpandedChunk& ch) {
  const MlaExpandedAttentionParams& p = *ch.p;
  ExpandedState& st = *ch.state;
  constexpr int T = kAttendKeyBlock;
  const int n_pad = (ch.n_keys + T - 1) / T * T;
  const int H = p.n_heads, dn = p.qk_nope_head_dim, rd = p.layout.qk_rope_head_dim;
  if (p.dot_dtype == DType::BF16 && ch.key_begin == 0) {  // the rows' queries rounded, once per sequence
    const int dq = dn + rd, n_pairs = (dq + 1) / 2;
    if (Bf16PairDots<V>::kEnabled) st.q_bf16.assign(size_t(st.n_rows) * H * n_pairs * 2, 0);
    else st.q_round.resize(size_t(st.n_rows) * H * dq);
#pragma omp parallel for schedule(static) if (st.n_rows >= 16)
    for (int r = 0; r < st.n_rows; ++r)
      for (int h = 0; h < H; ++h) {
        const float* q = p.q + (ch.seq->row_begin + r) * p.ld_q + int64_t(h) * p.ld_q_head;
        if (Bf16PairDots<V>::kEnabled) round_to_bf16<V>(q, st.q_bf16.data() + (size_t(r) * H + h) * n_pairs * 2, dq);
        else
          for (int d = 0; d < dq; ++d) st.q_round[(size_t(r) * H + h) * dq + d] = bf16_to_f32(f32_to_bf16(q[d]));
      }
  }
  expanded_pack<V>(ch, n_pad);
  const int n_groups = (st.n_rows + 3) / 4;
#pragma omp parallel
  {
    thread_local AlignedVector<float> scores;
    scores.resize(size_t(4) * T);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < int64_t(n_groups) * H; ++task) {
      const int g = int(task / H), h = int(task % H);
      expanded_attend_task<V>(ch, n_pad, 4 * g, std::min(4, st.n_rows - 4 * g), h, scores.data());
    }
  }
}

}  // namespace
}  // namespace deepinfer::cpu
