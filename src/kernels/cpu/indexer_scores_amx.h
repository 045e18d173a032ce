// The lightning indexer's scores on AMX tiles (KernelTable::indexer_score_block; IndexerScoresParams).
// Included only by kernels_amx.cpp.
//
// Keys are the A operand, 16 to a tile: each key tile's rows are gathered once from wherever the
// keys lie, widened exactly to bf16 (FP4 by Fp4Widen, fp8 codes by the e4m3 lookup, bf16 copied),
// into [chunks][16 keys][32] with zeros past dim and past the last key. The query is the B operand,
// packed once per call as pack_token_tile packs activations: head group g (heads 16g..16g+15, zero
// queries past n_heads) as [chunks][16 pairs][16 heads][2], rounded to bf16 by VCVTNEPS2BF16. Then
// per key tile and up to four head groups at a time
//   C_g[key][head] = sum over chunks of keys [16 x 32] x Q_g^T      (TDPBF16PS, exact products)
// and per key, lanes = the group's heads, in ascending group order
//   t = fma(max(C_g[key] (* the key's fp8 scale), 0), w_g, t),     score = Avx512::hsum(t)
// (hsum_4x4 computes 16 keys' hsums at once with the same additions). Each C element reads one key
// row and one head column, and the sum over heads is a fixed sequence per key, so a key's bits
// depend only on the query, the weights and that key: not on the other keys of its tile, the span
// or the thread. TDPBF16PS treats subnormal bf16 inputs as zero and VCVTNEPS2BF16 reads subnormal
// f32 as zero, so a query element or key below 2^-126 contributes nothing here (the vector levels
// keep them); the tiles' f32 sums flush subnormal results to zero likewise.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/aligned_vector.h"
#include "core/dtype.h"
#include "kernels/cpu/fp4_widen_avx512_bf16.h"
#include "kernels/cpu/simd_amx.h"
#include "kernels/cpu/simd_avx512_bf16.h"
#include "kernels/ops.h"

namespace deepinfer::cpu::amx {

constexpr int kIndexerTileGroups = 4;  // head groups (accumulator tiles tmm0-3) per pass over a key tile

// Keys [e0, e0 + n) of p, n <= 16, as the A operand: key i's chunk c at rows + c * kBlockElems + 32 i,
// zero past dim and for i >= n; scale[i] their fp8 scales (1 for other dtypes).
inline void gather_key_tile(const IndexerScoresParams& p, int64_t e0, int n, int64_t kc, const Avx512Bf16::Fp8Lut& lut,
                            uint16_t* rows, float (&scale)[kTile]) {
  const int64_t dim = p.dim;
  for (int i = 0; i < kTile; ++i) {
    scale[i] = 1.0f;
    uint16_t* row = rows + i * 32;
    if (i >= n) {
      for (int64_t c = 0; c < kc; ++c) _mm512_store_si512(row + c * kBlockElems, _mm512_setzero_si512());
      continue;
    }
    const uint8_t* key = static_cast<const uint8_t*>(p.keys[e0 + i]);
    if (p.key_dtype == DType::F4_E2M1) {  // dim a multiple of 32: one scale byte per chunk
      const uint8_t* scales = key + dim / 2;
      for (int64_t c = 0; c < kc; ++c)
        _mm512_store_si512(row + c * kBlockElems, Fp4Widen<Avx512Bf16>::block_bf16(key + c * 16, scales[c]));
    } else if (p.key_dtype == DType::F8_E4M3) {  // dim <= 128, the f32 scale after the codes
      std::memcpy(&scale[i], key + dim, 4);
      for (int64_t d = 0; d < dim; d += 64) {
        __m512i w[2];
        Avx512Bf16::fp8x64_to_bf16(lut, key + d, int(std::min<int64_t>(64, dim - d)), w[0], w[1]);
        _mm512_store_si512(row + d / 32 * kBlockElems, w[0]);
        if (d + 32 < dim) _mm512_store_si512(row + (d / 32 + 1) * kBlockElems, w[1]);
      }
    } else {
      const uint16_t* k = reinterpret_cast<const uint16_t*>(key);
      for (int64_t c = 0; c < kc; ++c) {
        const int64_t left = dim - 32 * c;
        const __m512i v = left >= 32 ? _mm512_loadu_si512(k + 32 * c)
                                     : _mm512_maskz_loadu_epi16(__mmask32((1u << left) - 1u), k + 32 * c);
        _mm512_store_si512(row + c * kBlockElems, v);
      }
    }
  }
}

// acc_a (+)= the key tile's chunks x head group a's, a < ng <= 4 (tmm4: keys; tmm5-7: queries).
inline void indexer_tile_products(const uint16_t* keys, const uint16_t* q, int64_t group_elems, int64_t kc, int ng) {
  _tile_zero(0);
  if (ng > 1) _tile_zero(1);
  if (ng > 2) _tile_zero(2);
  if (ng > 3) _tile_zero(3);
  for (int64_t c = 0; c < kc; ++c) {
    const uint16_t* qc = q + c * kBlockElems;
    _tile_loadd(4, keys + c * kBlockElems, 64);
    _tile_loadd(5, qc, 64);
    _tile_dpbf16ps(0, 4, 5);
    if (ng > 1) {
      _tile_loadd(6, qc + group_elems, 64);
      _tile_dpbf16ps(1, 4, 6);
    }
    if (ng > 2) {
      _tile_loadd(7, qc + 2 * group_elems, 64);
      _tile_dpbf16ps(2, 4, 7);
    }
    if (ng > 3) {
      _tile_loadd(5, qc + 3 * group_elems, 64);
      _tile_dpbf16ps(3, 4, 5);
    }
  }
}

inline void indexer_score_block(const IndexerScoresParams& p, int64_t e_begin, int64_t e_end) {
  if (e_begin >= e_end) return;
  const int64_t kc = (p.dim + kChunk - 1) / kChunk, group_elems = kc * kBlockElems;
  const int n_groups = (p.n_heads + kTile - 1) / kTile;
  thread_local AlignedVector<uint16_t> q_tiles, key_rows;
  thread_local AlignedVector<float> w_pad;
  q_tiles.resize(size_t(n_groups * group_elems));
  key_rows.resize(size_t(group_elems));
  w_pad.assign(size_t(n_groups * kTile), 0.0f);
  std::copy(p.head_weights, p.head_weights + p.n_heads, w_pad.begin());
  for (int g = 0; g < n_groups; ++g) {
    const float* heads[kTile];
    const int m = std::min(kTile, p.n_heads - g * kTile);
    for (int h = 0; h < m; ++h) heads[h] = p.q + int64_t(g * kTile + h) * p.dim;
    pack_token_tile(heads, m, p.dim, q_tiles.data() + g * group_elems);
  }
  const Avx512Bf16::Fp8Lut lut;
  const bool scaled = p.key_dtype == DType::F8_E4M3;
  alignas(64) float c_tiles[kIndexerTileGroups][kTile * kTile];
  alignas(64) float t_keys[kTile][kTile];  // per key: its running sum over the head groups so far
  TileScope tiles;
  for (int64_t e0 = e_begin; e0 < e_end; e0 += kTile) {
    const int n = int(std::min<int64_t>(kTile, e_end - e0));
    float scale[kTile];
    gather_key_tile(p, e0, n, kc, lut, key_rows.data(), scale);
    for (int g0 = 0; g0 < n_groups; g0 += kIndexerTileGroups) {
      const int ng = std::min(kIndexerTileGroups, n_groups - g0);
      indexer_tile_products(key_rows.data(), q_tiles.data() + g0 * group_elems, group_elems, kc, ng);
      _tile_stored(0, c_tiles[0], 64);
      if (ng > 1) _tile_stored(1, c_tiles[1], 64);
      if (ng > 2) _tile_stored(2, c_tiles[2], 64);
      if (ng > 3) _tile_stored(3, c_tiles[3], 64);
      for (int i = 0; i < n; ++i) {
        __m512 t = g0 == 0 ? _mm512_setzero_ps() : _mm512_load_ps(t_keys[i]);
        for (int a = 0; a < ng; ++a) {
          __m512 dot = _mm512_load_ps(c_tiles[a] + i * kTile);
          if (scaled) dot = _mm512_mul_ps(dot, _mm512_set1_ps(scale[i]));
          t = _mm512_fmadd_ps(_mm512_max_ps(dot, _mm512_setzero_ps()), _mm512_loadu_ps(w_pad.data() + (g0 + a) * kTile), t);
        }
        _mm512_store_ps(t_keys[i], t);
      }
    }
    __m512 v[4][4];
    for (int i = 0; i < kTile; ++i) v[i / 4][i % 4] = i < n ? _mm512_load_ps(t_keys[i]) : _mm512_setzero_ps();
    alignas(64) float sums[kTile];
    _mm512_store_ps(sums, Avx512::hsum_4x4(v));
    std::copy(sums, sums + n, p.scores + e0);
  }
}

}  // namespace deepinfer::cpu::amx
