// Absorbed MLA attention on AMX tiles, for bf16 dots (MlaAttentionParams' dot_dtype BF16) over a
// bf16 cache, or an fp8 one read as the bf16 cache holding each entry's latent dequantized and
// rounded to bf16 (as mla_attention_kernels.h). Included only by kernels_amx.cpp; f32 dots take the
// vector kernel.
//
// A row's heads go in tiles of 16 (padding heads are zero queries, never stored). Keys are read in
// blocks of kAmxAttendKeyBlock positions at fixed absolute offsets, 16 keys to a tile, straight
// from the paged cache where 16 consecutive positions lie in one page and an entry is whole
// chunks of 32 (else copied into zero-padded rows first). Per block and head tile:
//   scores: C[key][head] = sum over chunks of keys [16 keys x 32 d] x Q^T [16 pairs x 16 heads x 2]
//           (the queries packed once per row as pack_token_tile packs activations), times the scale;
//   softmax: lanes are heads, so the online update (running max and sum, as softmax_block_update
//           does it per head) is lane-wise; the weights are rounded to bf16 for the values and the
//           running sum takes them unrounded, as the expanded attention;
//   values: the cached latents are the B operand as stored, [16 keys, 16 column pairs, 2], so one
//           tile product with the weights in the even halves of A's pairs (odd halves zero) sums
//           the even latent columns and one with them in the odd halves sums the odd columns;
//           the accumulator out = out * alpha + block's sum is kept split by parity in f32 and
//           interleaved into out_latent once at the end.
// Every output is a function of its head's query, its row's position and the cache alone: each
// tile element reads one A row and one B column, the softmax is lane-wise and the blocking is by
// absolute position, so neither the other heads of the tile, the head grouping, the batch nor the
// thread changes a bit.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/aligned_vector.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/mla_attention_kernels.h"
#include "kernels/cpu/simd_amx.h"
#include "kernels/cpu/simd_avx512_bf16.h"
#include "kernels/ops.h"

namespace deepinfer::cpu::amx {

constexpr int kAmxAttendKeyBlock = 128;  // keys per online-softmax block (8 tiles of 16)
constexpr int kKeyTile = 16;
constexpr int kGroupsPerBlock = kAmxAttendKeyBlock / kKeyTile;

// Per-thread state of one row's attention. Sizes in elements.
struct AmxAttendScratch {
  AlignedVector<uint16_t> q_tiles;   // [head tiles][chunks][16 pairs][16 heads][2]
  AlignedVector<float> q_rows;       // [16][dk]: one head tile's [q_latent | q_pe], f32
  AlignedVector<float> out;          // [head tiles][column groups][parity][16 heads][16]
  AlignedVector<float> run_max, run_sum;  // [head tiles][16]
  AlignedVector<float> scores;       // [kAmxAttendKeyBlock][16 heads]: scores, then weights
  AlignedVector<uint32_t> weights;   // [kGroupsPerBlock][parity][16 heads][16 keys]: A operands
  AlignedVector<uint16_t> key_rows;  // [kGroupsPerBlock][16][dk_pad]: keys that cannot be read in place
  AlignedVector<float> key_f32;      // [16][dk]: an fp8 cache's keys dequantized, before rounding
  AlignedVector<float> sums;         // [parity][16 heads][16]: one column group's block sums
};

// Where tile g of a key block reads its 16 keys: row i at base + i * stride (bytes).
struct KeyTile {
  const uint8_t* base;
  int64_t stride;
};

// The 16 keys from position t0 (n_valid of them in the row's causal range): in place where they are
// whole chunks in one page of a bf16 cache, else copied into rows (an fp8 cache's dequantized
// through f32 scratch `f` [16][dk] and rounded to bf16; zero past dk and past n_valid, so that
// padding never multiplies a stray NaN into a kept score).
inline KeyTile key_tile(const MlaAttentionParams& p, const BatchSequence& s, int32_t t0, int n_valid, int dk,
                        int dk_pad, uint16_t* rows, float* f) {
  const int64_t bpt = int64_t(p.layout.bytes_per_token());
  const int32_t in_page = t0 % p.block_size;
  const bool fp8 = p.layout.dtype == DType::F8_E4M3;
  if (!fp8 && n_valid == kKeyTile && dk == dk_pad && in_page + kKeyTile <= p.block_size)
    return {cache_entry(p, s, t0), bpt};
  if (fp8) load_key_block<Avx512Bf16>(p, s, t0, n_valid, f);
  for (int i = 0; i < kKeyTile; ++i) {
    uint16_t* dst = rows + size_t(i) * dk_pad;
    if (i < n_valid) {
      if (fp8) Avx512Bf16::round_to_bf16(f + size_t(i) * dk, dst, dk);
      else std::memcpy(dst, cache_entry(p, s, t0 + i), size_t(dk) * 2);
      std::fill(dst + dk, dst + dk_pad, uint16_t(0));
    } else {
      std::fill(dst, dst + dk_pad, uint16_t(0));
    }
  }
  return {reinterpret_cast<const uint8_t*>(rows), int64_t(dk_pad) * 2};
}

// Weights p[t][h] (t < 16 keys of one tile, lanes = heads) rounded to bf16, transposed into the
// values' A operands: even[h] dword t = bf16(p[t][h]) in its low half, odd[h] the same in its high.
inline void weight_tiles(const float* p, uint32_t* even, uint32_t* odd) {
  transpose16_by([&](int t) { return _mm512_cvtepu16_epi32(__m256i(_mm512_cvtneps_pbh(_mm512_load_ps(p + t * 16)))); },
                 [&](int h, __m512i v) {
                   _mm512_store_si512(even + h * 16, v);
                   _mm512_store_si512(odd + h * 16, _mm512_slli_epi32(v, 16));
                 });
}

// Values of one head tile for column groups cg and cg + 1 (where `two`): tmm0/1 = the even/odd
// columns' sums of group cg, tmm2/3 of group cg + 1, over key tiles g < n_g in order, each the
// weights' A operands (weight_tiles: even at weights + 512 g, odd 256 after) times the key tile's
// rows as stored (key(g), a KeyTile) as the B operand.
template <class KeyAt>
inline void value_tiles(const uint32_t* weights, int n_g, const KeyAt& key, int cg, bool two) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int g = 0; g < n_g; ++g) {
    const KeyTile kt = key(g);
    _tile_loadd(4, weights + size_t(g) * 512, 64);
    _tile_loadd(5, weights + size_t(g) * 512 + 256, 64);
    _tile_loadd(6, kt.base + cg * 64, kt.stride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 5, 6);
    if (two) {
      _tile_loadd(7, kt.base + (cg + 1) * 64, kt.stride);
      _tile_dpbf16ps(2, 4, 7);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
}

// One column group's sums (value_tiles' tmm0/1 or tmm2/3 stored: sums[parity][h][i]) interleaved
// into the rows of heads h < hn: out[h * dim + c0 + 2i + parity], for the columns below dim; each
// divided by divisors[h] (as a multiplication by 1 / divisors[h]) where divisors is given.
inline void store_pairs(const float* sums, int hn, int c0, int dim, float* out, const float* divisors = nullptr) {
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const int n = std::min(32, dim - c0);
  const __mmask16 m0 = __mmask16(n >= 16 ? 0xffff : (1u << n) - 1u);
  const __mmask16 m1 = __mmask16(n >= 32 ? 0xffff : n <= 16 ? 0 : (1u << (n - 16)) - 1u);
  for (int h = 0; h < hn; ++h) {
    const __m512 e = _mm512_load_ps(sums + h * 16), o = _mm512_load_ps(sums + 256 + h * 16);
    __m512 a = _mm512_permutex2var_ps(e, lo, o), b = _mm512_permutex2var_ps(e, hi, o);
    if (divisors) {
      const __m512 inv = _mm512_set1_ps(1.0f / divisors[h]);
      a = _mm512_mul_ps(a, inv);
      b = _mm512_mul_ps(b, inv);
    }
    _mm512_mask_storeu_ps(out + size_t(h) * dim + c0, m0, a);
    _mm512_mask_storeu_ps(out + size_t(h) * dim + c0 + 16, m1, b);
  }
}

// The row's attention for heads [h0, h1) with bf16 dots (p.dot_dtype BF16, bf16 or fp8 cache).
inline void mla_attend_row_tiles(const MlaAttentionParams& p, const BatchSequence& s, int64_t row, int h0, int h1) {
  using V = Avx512Bf16;
  constexpr int T = kAmxAttendKeyBlock;
  thread_local AmxAttendScratch ws;
  const int c = p.layout.kv_lora_rank, rd = p.layout.qk_rope_head_dim, dk = c + rd;
  const int n_chunks = (dk + 31) / 32, dk_pad = n_chunks * 32, n_cg = (c + 31) / 32;
  const int n_ht = (h1 - h0 + 15) / 16;
  const int32_t n_keys = p.batch->positions[size_t(row)] + 1;
  const size_t q_tile_elems = size_t(n_chunks) * kBlockElems, out_tile_elems = size_t(n_cg) * 2 * 256;
  ws.q_tiles.resize(size_t(n_ht) * q_tile_elems);
  ws.q_rows.resize(size_t(16) * dk);
  ws.out.assign(size_t(n_ht) * out_tile_elems, 0.0f);
  ws.run_max.assign(size_t(n_ht) * 16, -INFINITY);
  ws.run_sum.assign(size_t(n_ht) * 16, 0.0f);
  ws.scores.resize(size_t(T) * 16);
  ws.weights.resize(size_t(kGroupsPerBlock) * 2 * 256);
  ws.key_rows.resize(size_t(kGroupsPerBlock) * 16 * dk_pad);
  if (p.layout.dtype == DType::F8_E4M3) ws.key_f32.resize(size_t(16) * dk);
  ws.sums.resize(2 * 256);

  // Queries: each head's [q_latent | q_pe], packed per head tile.
  for (int ht = 0; ht < n_ht; ++ht) {
    const int hb = h0 + ht * 16, hn = std::min(16, h1 - hb);
    const float* rows[16];
    for (int i = 0; i < hn; ++i) {
      float* dst = ws.q_rows.data() + size_t(i) * dk;
      std::memcpy(dst, p.q_latent + (row * p.n_heads + hb + i) * c, size_t(c) * 4);
      std::memcpy(dst + c, p.q_pe + row * p.ld_q_pe_row + (hb + i) * p.ld_q_pe_head, size_t(rd) * 4);
      rows[i] = dst;
    }
    pack_token_tile(rows, hn, dk, ws.q_tiles.data() + size_t(ht) * q_tile_elems);
  }

  TileScope tiles;
  KeyTile src[kGroupsPerBlock];
  const __m512 scale = _mm512_set1_ps(p.softmax_scale);
  for (int32_t t0 = 0; t0 < n_keys; t0 += T) {
    const int n_t = std::min<int32_t>(T, n_keys - t0), n_g = (n_t + 15) / 16;
    for (int g = 0; g < n_g; ++g)
      src[g] = key_tile(p, s, t0 + g * 16, std::min(16, n_t - g * 16), dk, dk_pad,
                        ws.key_rows.data() + size_t(g) * 16 * dk_pad, ws.key_f32.data());

    for (int ht = 0; ht < n_ht; ++ht) {
      // Scores, two key tiles at a time: tmm0/1 += keys (tmm4/5) x queries (tmm6).
      const uint16_t* q = ws.q_tiles.data() + size_t(ht) * q_tile_elems;
      for (int g = 0; g < n_g; g += 2) {
        const bool two = g + 1 < n_g;
        _tile_zero(0);
        _tile_zero(1);
        for (int j = 0; j < n_chunks; ++j) {
          _tile_loadd(6, q + size_t(j) * kBlockElems, 64);
          _tile_loadd(4, src[g].base + j * 64, src[g].stride);
          _tile_dpbf16ps(0, 4, 6);
          if (two) {
            _tile_loadd(5, src[g + 1].base + j * 64, src[g + 1].stride);
            _tile_dpbf16ps(1, 5, 6);
          }
        }
        _tile_stored(0, ws.scores.data() + size_t(g) * 256, 64);
        if (two) _tile_stored(1, ws.scores.data() + size_t(g + 1) * 256, 64);
      }

      // Online softmax, lane-wise over the tile's heads.
      float* sc = ws.scores.data();
      float* m_run = ws.run_max.data() + ht * 16;
      float* s_run = ws.run_sum.data() + ht * 16;
      __m512 m_blk = _mm512_set1_ps(-INFINITY);
      for (int t = 0; t < n_t; ++t) {
        const __m512 v = _mm512_mul_ps(_mm512_load_ps(sc + t * 16), scale);
        _mm512_store_ps(sc + t * 16, v);
        m_blk = _mm512_max_ps(m_blk, v);
      }
      const __m512 m_old = _mm512_load_ps(m_run), m_new = _mm512_max_ps(m_old, m_blk);
      const __m512 alpha = vexp<V>(_mm512_sub_ps(m_old, m_new));
      __m512 sum = _mm512_setzero_ps();
      for (int t = 0; t < n_t; ++t) {
        const __m512 e = vexp<V>(_mm512_sub_ps(_mm512_load_ps(sc + t * 16), m_new));
        _mm512_store_ps(sc + t * 16, e);
        sum = _mm512_add_ps(sum, e);
      }
      for (int t = n_t; t < n_g * 16; ++t) _mm512_store_ps(sc + t * 16, _mm512_setzero_ps());
      _mm512_store_ps(s_run, _mm512_fmadd_ps(_mm512_load_ps(s_run), alpha, sum));
      _mm512_store_ps(m_run, m_new);
      for (int g = 0; g < n_g; ++g)
        weight_tiles(sc + g * 256, ws.weights.data() + size_t(g) * 512, ws.weights.data() + size_t(g) * 512 + 256);

      // Values, two column groups at a time: tmm0/1 (even/odd of group cg), tmm2/3 (of cg + 1)
      // += weights (tmm4 even, tmm5 odd) x latents (tmm6, tmm7).
      alignas(64) float al[16];
      _mm512_store_ps(al, alpha);
      float* out = ws.out.data() + size_t(ht) * out_tile_elems;
      // o = o * alpha + the block's sums of one column group (rows: parity * 16 + head).
      auto fold = [&](float* o) {
        for (int i = 0; i < 32; ++i)
          _mm512_store_ps(o + i * 16, _mm512_fmadd_ps(_mm512_load_ps(o + i * 16), _mm512_set1_ps(al[i % 16]),
                                                      _mm512_load_ps(ws.sums.data() + i * 16)));
      };
      for (int cg = 0; cg < n_cg; cg += 2) {
        const bool two = cg + 1 < n_cg;
        value_tiles(ws.weights.data(), n_g, [&](int g) { return src[g]; }, cg, two);
        _tile_stored(0, ws.sums.data(), 64);
        _tile_stored(1, ws.sums.data() + 256, 64);
        fold(out + size_t(cg) * 512);
        if (two) {
          _tile_stored(2, ws.sums.data(), 64);
          _tile_stored(3, ws.sums.data() + 256, 64);
          fold(out + size_t(cg + 1) * 512);
        }
      }
    }
  }

  // out_latent[h][32 cg + 2 n + parity] = out[cg][parity][h][n] / run_sum[h].
  for (int ht = 0; ht < n_ht; ++ht) {
    const int hb = h0 + ht * 16, hn = std::min(16, h1 - hb);
    const float* out = ws.out.data() + size_t(ht) * out_tile_elems;
    for (int cg = 0; cg < n_cg; ++cg)
      store_pairs(out + size_t(cg) * 512, hn, cg * 32, c, p.out_latent + (row * p.n_heads + hb) * c,
                  ws.run_sum.data() + size_t(ht) * 16);
  }
}

// The amx level's row attention: tiles for bf16 dots, the vector kernel for f32 ones.
inline void mla_attend_row(const MlaAttentionParams& p, const BatchSequence& s, int64_t row, int h0, int h1,
                           AttendScratch& scratch) {
  if (p.dot_dtype == DType::BF16) return mla_attend_row_tiles(p, s, row, h0, h1);
  cpu::mla_attend_row<Avx512Bf16>(p, s, row, h0, h1, scratch);
}

}  // namespace deepinfer::cpu::amx
