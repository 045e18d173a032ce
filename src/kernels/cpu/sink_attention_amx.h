// Sink attention with bf16 dots on AMX tiles (SinkAttentionParams' dot_dtype BF16;
// KernelTable::sink_attend_bf16). Included only by kernels_amx.cpp.
//
// The keys arrive rounded, [ceil(n / 16) * 16 rows][ld] bf16, zero past n and dim, so every tile
// reads them in place. Heads go in tiles of 16 (padding heads are zero queries, never stored). Per
// head tile:
//   scores:  C[key][head] = sum over chunks of keys [16 keys x 32 dims] x Q^T [16 pairs x 16 heads
//            x 2] (the queries packed by pack_token_tile), four key tiles per pass over the chunks;
//   softmax: lanes are heads, so mx = max(sink, max_t s_t * scale), e_t = e^(s_t * scale - mx), the
//            sum over t in ascending order plus e^(sink - mx), and w_t = e_t * (1 / sum) are all
//            lane-wise; the weights are rounded to bf16 and transposed into A operands;
//   values:  the keys are the B operand as stored, [16 keys, 16 column pairs, 2], so one tile
//            product with the weights in the even halves of A's pairs (odd halves zero) sums the
//            even columns and one with them in the odd halves the odd columns, over every key tile
//            in ascending order in one accumulator.
// Each output reads one A row and one B column per tile product and the softmax is lane-wise, so a
// head's bits depend only on its query, its sink, the scale and the keys: not on the other heads,
// the head grouping nor the thread.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/aligned_vector.h"
#include "kernels/cpu/mla_attention_amx.h"
#include "kernels/cpu/simd_amx.h"
#include "kernels/cpu/simd_avx512_bf16.h"
#include "kernels/cpu/vexp.h"
#include "kernels/ops.h"

namespace deepinfer::cpu::amx {

// Per-thread state of one head tile. Sizes in elements.
struct SinkScratch {
  AlignedVector<uint16_t> q_tile;   // [chunks][16 pairs][16 heads][2]
  AlignedVector<float> scores;      // [key tiles * 16][16 heads]: scores, then weights
  AlignedVector<uint32_t> weights;  // [key tiles][parity][16 heads][16 keys]: the values' A operands
  AlignedVector<float> sums;        // [4][16 heads][16]: two column groups' even and odd sums
};

// tmm0..tmm(n - 1) = key tiles g..g + n - 1 (tmm4/5 in turn) x the queries (tmm6), over every chunk.
template <int N>
inline void score_tiles(const uint16_t* keys, int64_t ld, int g, const uint16_t* q, int n_chunks, float* scores) {
  const int64_t stride = ld * 2, tile = 16 * stride;
  const uint8_t* base = reinterpret_cast<const uint8_t*>(keys) + g * tile;
  _tile_zero(0);
  if constexpr (N > 1) _tile_zero(1);
  if constexpr (N > 2) _tile_zero(2);
  if constexpr (N > 3) _tile_zero(3);
  for (int j = 0; j < n_chunks; ++j) {
    _tile_loadd(6, q + size_t(j) * kBlockElems, 64);
    _tile_loadd(4, base + j * 64, stride);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (N > 1) {
      _tile_loadd(5, base + tile + j * 64, stride);
      _tile_dpbf16ps(1, 5, 6);
    }
    if constexpr (N > 2) {
      _tile_loadd(4, base + 2 * tile + j * 64, stride);
      _tile_dpbf16ps(2, 4, 6);
    }
    if constexpr (N > 3) {
      _tile_loadd(5, base + 3 * tile + j * 64, stride);
      _tile_dpbf16ps(3, 5, 6);
    }
  }
  float* s = scores + size_t(g) * 256;
  _tile_stored(0, s, 64);
  if constexpr (N > 1) _tile_stored(1, s + 256, 64);
  if constexpr (N > 2) _tile_stored(2, s + 512, 64);
  if constexpr (N > 3) _tile_stored(3, s + 768, 64);
}

// One head tile [h0, h0 + hn), hn <= 16.
inline void sink_attend_head_tile(const SinkAttentionParams& p, const uint16_t* keys, int64_t ld, int h0, int hn,
                                  SinkScratch& ws) {
  using V = Avx512Bf16;
  const int n = p.n_keys, d = p.dim, n_g = (n + 15) / 16, n_chunks = int(ld / 32);
  ws.q_tile.resize(size_t(n_chunks) * kBlockElems);
  ws.scores.resize(size_t(n_g) * 256);
  ws.weights.resize(size_t(n_g) * 512);
  ws.sums.resize(4 * 256);
  const float* rows[16];
  for (int i = 0; i < hn; ++i) rows[i] = p.q + size_t(h0 + i) * d;
  pack_token_tile(rows, hn, d, ws.q_tile.data());

  int g = 0;
  for (; g + 4 <= n_g; g += 4) score_tiles<4>(keys, ld, g, ws.q_tile.data(), n_chunks, ws.scores.data());
  switch (n_g - g) {
    case 3: score_tiles<3>(keys, ld, g, ws.q_tile.data(), n_chunks, ws.scores.data()); break;
    case 2: score_tiles<2>(keys, ld, g, ws.q_tile.data(), n_chunks, ws.scores.data()); break;
    case 1: score_tiles<1>(keys, ld, g, ws.q_tile.data(), n_chunks, ws.scores.data()); break;
    default: break;
  }

  // Softmax, lane-wise over the tile's heads (padding lanes: sink 0, never stored).
  float* sc = ws.scores.data();
  const __m512 scale = _mm512_set1_ps(p.scale);
  const __m512 sink = _mm512_maskz_loadu_ps(__mmask16((1u << hn) - 1u), p.sink + h0);
  __m512 mx = sink;
  for (int t = 0; t < n; ++t) {
    const __m512 v = _mm512_mul_ps(_mm512_load_ps(sc + t * 16), scale);
    _mm512_store_ps(sc + t * 16, v);
    mx = _mm512_max_ps(mx, v);
  }
  __m512 sum = _mm512_setzero_ps();
  for (int t = 0; t < n; ++t) {
    const __m512 e = vexp<V>(_mm512_sub_ps(_mm512_load_ps(sc + t * 16), mx));
    _mm512_store_ps(sc + t * 16, e);
    sum = _mm512_add_ps(sum, e);
  }
  const __m512 inv = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(sum, vexp<V>(_mm512_sub_ps(sink, mx))));
  for (int t = 0; t < n; ++t) _mm512_store_ps(sc + t * 16, _mm512_mul_ps(_mm512_load_ps(sc + t * 16), inv));
  for (int t = n; t < n_g * 16; ++t) _mm512_store_ps(sc + t * 16, _mm512_setzero_ps());
  for (int k = 0; k < n_g; ++k)
    weight_tiles(sc + k * 256, ws.weights.data() + size_t(k) * 512, ws.weights.data() + size_t(k) * 512 + 256);

  // Values, two column groups at a time (value_tiles).
  const int64_t stride = ld * 2;
  const uint8_t* base = reinterpret_cast<const uint8_t*>(keys);
  float* out = p.out + size_t(h0) * d;
  const int n_cg = (d + 31) / 32;
  for (int cg = 0; cg < n_cg; cg += 2) {
    const bool two = cg + 1 < n_cg;
    value_tiles(ws.weights.data(), n_g, [&](int k) { return KeyTile{base + k * 16 * stride, stride}; }, cg, two);
    _tile_stored(0, ws.sums.data(), 64);
    _tile_stored(1, ws.sums.data() + 256, 64);
    store_pairs(ws.sums.data(), hn, cg * 32, d, out);
    if (two) {
      _tile_stored(2, ws.sums.data() + 512, 64);
      _tile_stored(3, ws.sums.data() + 768, 64);
      store_pairs(ws.sums.data() + 512, hn, (cg + 1) * 32, d, out);
    }
  }
}

// KernelTable::sink_attend_bf16: heads [h0, h1), a tile of 16 at a time.
inline void sink_attend_bf16(const SinkAttentionParams& p, const uint16_t* keys, int64_t ld_keys, int h0, int h1) {
  thread_local SinkScratch ws;
  TileScope tiles;
  for (int hb = h0; hb < h1; hb += 16) sink_attend_head_tile(p, keys, ld_keys, hb, std::min(16, h1 - hb), ws);
}

}  // namespace deepinfer::cpu::amx
