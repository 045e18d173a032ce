// Expanded MLA attention (the prefill formulation) with bf16 dots on AMX tiles
// (MlaExpandedAttentionParams' dot_dtype BF16; KernelTable::mla_expanded_attend_chunk on the amx
// level; f32 dots take the avx512bf16-fma level's vector kernel). Included only by kernels_amx.cpp.
//
// Operands (ExpandedState, per chunk of the sequence's positions; dq = qk_nope + rope and dv padded
// with zeros to dq_pad, a multiple of 32, and dv_pad, a multiple of 16):
//   q_bf16      [n_rows + 15][n_heads][dq_pad]: the rows' queries rounded to bf16 (nearest even), so
//               16 consecutive rows of one head are an A operand, rows past n_rows zero;
//   keys_bf16   [n_heads][n_pad / 16][dq_pad / 2][16][2]: chunk c of key tile g is the B operand at
//               pair row 16c, 1 KiB;
//   value_pairs [n_heads][n_pad / 2][dv_pad][2]: 16 key pairs x 16 columns are a B operand, rows
//               dv_pad * 4 bytes apart.
// Tasks are (16 consecutive rows, 1 head). Per absolute key block of kAttendKeyBlock (64) keys
// that a task's rows reach:
//   scores:  C[row][key] = sum over chunks of Q [16 rows x 32 dims] x K [16 pairs x 16 keys x 2],
//            four key tiles, times the scale;
//   softmax: per row, softmax_block_update over its own keys [t0, position] (the vector kernel's
//            online update), the weights past them 0, rounded to bf16;
//   values:  C[row][column] = sum over the block's two chunks of P [16 rows x 32 keys] x
//            V [16 key pairs x 16 columns x 2], from zero, then acc = fma(acc, alpha, C).
// A row that does not reach a block leaves its state as it is. Each tile element reads one A row
// and one B column, so a row's bits depend only on its query, its position and the keys: not on
// the rows beside it in the tile, the chunking, the batch nor the thread.
#pragma once

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "core/aligned_vector.h"
#include "core/dtype.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/mla_attention_kernels.h"
#include "kernels/cpu/mla_expanded_chunk.h"
#include "kernels/cpu/simd_amx.h"
#include "kernels/cpu/simd_avx512_bf16.h"
#include "kernels/ops.h"

namespace deepinfer::cpu::amx {

// The padded sizes of the operands above.
struct ExpandedDims {
  int H, dq, dq_pad, dv, dv_pad, n_chunks;
  explicit ExpandedDims(const MlaExpandedAttentionParams& p)
      : H(p.n_heads),
        dq(p.qk_nope_head_dim + p.layout.qk_rope_head_dim),
        dq_pad((dq + kChunk - 1) / kChunk * kChunk),
        dv(p.v_head_dim),
        dv_pad((dv + kTile - 1) / kTile * kTile),
        n_chunks(dq_pad / kChunk) {}
};

// The rows' queries rounded into q_bf16 (once per sequence).
inline void expanded_queries(const ExpandedChunk& ch, const ExpandedDims& dm) {
  const MlaExpandedAttentionParams& p = *ch.p;
  ExpandedState& st = *ch.state;
  st.q_bf16.assign(size_t(st.n_rows + kTile - 1) * dm.H * dm.dq_pad, 0);
#pragma omp parallel for schedule(static) if (st.n_rows >= 16)
  for (int r = 0; r < st.n_rows; ++r)
    for (int h = 0; h < dm.H; ++h)
      Avx512Bf16::round_to_bf16(p.q + (ch.seq->row_begin + r) * p.ld_q + int64_t(h) * p.ld_q_head,
                                st.q_bf16.data() + (size_t(r) * dm.H + h) * dm.dq_pad, dm.dq);
}

// The chunk's expanded keys and values into keys_bf16 and value_pairs, zero past n_keys, dq, dv.
inline void expanded_operands(const ExpandedChunk& ch, const ExpandedDims& dm, int n_pad) {
  const MlaExpandedAttentionParams& p = *ch.p;
  ExpandedState& st = *ch.state;
  const int dn = p.qk_nope_head_dim, rd = p.layout.qk_rope_head_dim, pairs = dm.dq_pad / 2;
  const int64_t ld_kv = int64_t(dm.H) * (dn + dm.dv);
  st.keys_bf16.resize(size_t(dm.H) * n_pad * dm.dq_pad);
  st.value_pairs.resize(size_t(dm.H) * n_pad * dm.dv_pad);
#pragma omp parallel for schedule(static)
  for (int t = 0; t < n_pad; ++t) {
    const bool valid = t < ch.n_keys;
    const float* kv = ch.kv + int64_t(valid ? t : 0) * ld_kv;
    const float* pe = ch.k_pe + size_t(valid ? t : 0) * rd;
    alignas(64) uint16_t row[1024];  // one key [dq_pad] or one value [dv_pad], rounded
    for (int h = 0; h < dm.H; ++h) {
      const float* k_src = kv + int64_t(h) * (dn + dm.dv);
      std::fill(row, row + dm.dq_pad, uint16_t(0));
      if (valid) {
        Avx512Bf16::round_to_bf16(k_src, row, dn);
        Avx512Bf16::round_to_bf16(pe, row + dn, rd);
      }
      uint16_t* kd =
          st.keys_bf16.data() + ((size_t(h) * (n_pad / kTile) + t / kTile) * pairs) * 32 + size_t(t % kTile) * 2;
      for (int d = 0; d < pairs; ++d) std::copy_n(row + 2 * d, 2, kd + size_t(d) * 32);
      std::fill(row, row + dm.dv_pad, uint16_t(0));
      if (valid) Avx512Bf16::round_to_bf16(k_src + dn, row, dm.dv);
      uint16_t* vd = st.value_pairs.data() + ((size_t(h) * (n_pad / 2) + t / 2) * dm.dv_pad) * 2 + size_t(t % 2);
      for (int j = 0; j < dm.dv_pad; ++j) vd[2 * j] = row[j];
    }
  }
}

// Scores of one key block for a task's 16 rows: sc[i][t] = scale * q_i . key t, [16][64] f32.
inline void expanded_block_scores(const uint16_t* q, int64_t q_stride, const uint16_t* keys, int n_chunks, float scale,
                                  float* sc) {
  constexpr int64_t kTileKeys = int64_t(kBlockElems);  // one key tile's chunk, in elements
  const int64_t tile = int64_t(n_chunks) * kTileKeys;  // one key tile, every chunk
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int c = 0; c < n_chunks; ++c) {
    _tile_loadd(4, q + c * kChunk, q_stride);
    _tile_loadd(5, keys + c * kTileKeys, 64);
    _tile_dpbf16ps(0, 4, 5);
    _tile_loadd(6, keys + tile + c * kTileKeys, 64);
    _tile_dpbf16ps(1, 4, 6);
    _tile_loadd(5, keys + 2 * tile + c * kTileKeys, 64);
    _tile_dpbf16ps(2, 4, 5);
    _tile_loadd(6, keys + 3 * tile + c * kTileKeys, 64);
    _tile_dpbf16ps(3, 4, 6);
  }
  constexpr int T = kAttendKeyBlock;
  _tile_stored(0, sc, T * 4);
  _tile_stored(1, sc + 16, T * 4);
  _tile_stored(2, sc + 32, T * 4);
  _tile_stored(3, sc + 48, T * 4);
  const __m512 s = _mm512_set1_ps(scale);
  for (int i = 0; i < kTile * T; i += 16) _mm512_store_ps(sc + i, _mm512_mul_ps(_mm512_load_ps(sc + i), s));
}

// Column tiles [ct, ct + n) (n <= 4) of one key block's value sums for a task's 16 rows, from zero:
// sums[i][16 j + c] = sum over the block's keys of w[i][t] * value t column 16 (ct + j) + c.
template <int N>
inline void expanded_block_values(const uint16_t* w, const uint16_t* vals, int64_t v_stride, int ct, float* sums) {
  constexpr int T = kAttendKeyBlock;
  _tile_zero(0);
  if constexpr (N > 1) _tile_zero(1);
  if constexpr (N > 2) _tile_zero(2);
  if constexpr (N > 3) _tile_zero(3);
  for (int c = 0; c < T / kChunk; ++c) {
    _tile_loadd(4, w + c * kChunk, T * 2);
    const uint16_t* v = vals + int64_t(c) * kTile * (v_stride / 2) + int64_t(ct) * kTile * 2;
    _tile_loadd(5, v, v_stride);
    _tile_dpbf16ps(0, 4, 5);
    if constexpr (N > 1) {
      _tile_loadd(6, v + 32, v_stride);
      _tile_dpbf16ps(1, 4, 6);
    }
    if constexpr (N > 2) {
      _tile_loadd(5, v + 64, v_stride);
      _tile_dpbf16ps(2, 4, 5);
    }
    if constexpr (N > 3) {
      _tile_loadd(6, v + 96, v_stride);
      _tile_dpbf16ps(3, 4, 6);
    }
  }
  _tile_stored(0, sums, 4 * kTile * 4);
  if constexpr (N > 1) _tile_stored(1, sums + 16, 4 * kTile * 4);
  if constexpr (N > 2) _tile_stored(2, sums + 32, 4 * kTile * 4);
  if constexpr (N > 3) _tile_stored(3, sums + 48, 4 * kTile * 4);
}

// Per-thread scratch of a task: one block's scores (then weights) [16][64] f32, the weights as
// bf16 [16][64], and up to four column tiles of value sums [16][64] f32.
struct ExpandedScratch {
  alignas(64) float sc[kTile * kAttendKeyBlock];
  alignas(64) uint16_t w[kTile * kAttendKeyBlock];
  alignas(64) float sums[kTile * 4 * kTile];
};

// Rows [r0, r0 + nr) of the sequence (nr <= 16), head h, over the chunk's n_pad keys.
inline void expanded_attend_tile(const ExpandedChunk& ch, const ExpandedDims& dm, int n_pad, int r0, int nr, int h,
                                 ExpandedScratch& ws) {
  constexpr int T = kAttendKeyBlock;
  const MlaExpandedAttentionParams& p = *ch.p;
  ExpandedState& st = *ch.state;
  const int H = dm.H;
  const int64_t row0 = ch.seq->row_begin;
  int32_t pos[kTile];
  for (int i = 0; i < nr; ++i) pos[i] = p.batch->positions[size_t(row0 + r0 + i)];
  const uint16_t* q = st.q_bf16.data() + (size_t(r0) * H + h) * dm.dq_pad;
  const int64_t q_stride = int64_t(H) * dm.dq_pad * 2;
  const int64_t v_stride = int64_t(dm.dv_pad) * 4;
  const int n_ct = dm.dv_pad / kTile;
  for (int b0 = 0; b0 < n_pad; b0 += T) {
    const int32_t t0 = ch.key_begin + b0;
    int iv = 0;  // rows [iv, nr) reach this block (positions ascend)
    while (iv < nr && pos[iv] < t0) ++iv;
    if (iv == nr) break;
    const uint16_t* keys = st.keys_bf16.data() + (size_t(h) * (n_pad / kTile) + b0 / kTile) * dm.dq_pad * 16;
    expanded_block_scores(q, q_stride, keys, dm.n_chunks, p.softmax_scale, ws.sc);
    float alpha[kTile];
    for (int i = 0; i < kTile; ++i) {
      float* sc = ws.sc + i * T;
      if (i >= iv && i < nr) {
        const int r = r0 + i;
        const int n_t = std::min<int32_t>(T, pos[i] + 1 - t0);
        alpha[i] =
            softmax_block_update<Avx512Bf16>(sc, n_t, st.run_max[size_t(r) * H + h], st.run_sum[size_t(r) * H + h]);
        std::fill(sc + n_t, sc + T, 0.0f);
      } else {
        std::fill(sc, sc + T, 0.0f);
      }
      Avx512Bf16::round_to_bf16(sc, ws.w + i * T, T);
    }
    const uint16_t* vals = st.value_pairs.data() + (size_t(h) * (n_pad / 2) + b0 / 2) * dm.dv_pad * 2;
    for (int ct = 0; ct < n_ct; ct += 4) {
      switch (std::min(4, n_ct - ct)) {
        case 4: expanded_block_values<4>(ws.w, vals, v_stride, ct, ws.sums); break;
        case 3: expanded_block_values<3>(ws.w, vals, v_stride, ct, ws.sums); break;
        case 2: expanded_block_values<2>(ws.w, vals, v_stride, ct, ws.sums); break;
        default: expanded_block_values<1>(ws.w, vals, v_stride, ct, ws.sums); break;
      }
      const int c0 = ct * kTile, c1 = std::min(dm.dv, c0 + 4 * kTile);
      for (int i = iv; i < nr; ++i) {
        float* o = st.acc.data() + (size_t(r0 + i) * H + h) * dm.dv;
        const __m512 al = _mm512_set1_ps(alpha[i]);
        for (int c = c0; c < c1; c += 16) {
          const __mmask16 mk = __mmask16(c1 - c >= 16 ? 0xffff : (1u << (c1 - c)) - 1u);
          const __m512 s = _mm512_maskz_loadu_ps(mk, ws.sums + i * 4 * kTile + (c - c0));
          _mm512_mask_storeu_ps(o + c, mk, _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mk, o + c), al, s));
        }
      }
    }
  }
}

// KernelTable::mla_expanded_attend_chunk on the amx level.
inline void mla_expanded_attend_chunk(const ExpandedChunk& ch) {
  const MlaExpandedAttentionParams& p = *ch.p;
  const ExpandedDims dm(p);
  if (p.dot_dtype != DType::BF16 || dm.dq_pad > 1024 || dm.dv_pad > 1024)
    return kAvx512Bf16FmaKernels.mla_expanded_attend_chunk(ch);
  ExpandedState& st = *ch.state;
  constexpr int T = kAttendKeyBlock;
  const int n_pad = (ch.n_keys + T - 1) / T * T;
  if (ch.key_begin == 0) expanded_queries(ch, dm);
  expanded_operands(ch, dm, n_pad);
  const int n_tiles = (st.n_rows + kTile - 1) / kTile;
#pragma omp parallel
  {
    thread_local ExpandedScratch ws;
    TileScope tiles;
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < int64_t(n_tiles) * dm.H; ++task) {
      const int g = int(task / dm.H), h = int(task % dm.H);
      expanded_attend_tile(ch, dm, n_pad, kTile * g, std::min(kTile, st.n_rows - kTile * g), h, ws);
    }
  }
}

}  // namespace deepinfer::cpu::amx
