// The lightning indexer's scores over a SIMD traits type V (KernelTable::indexer_score_block;
// IndexerScoresParams), included by each kernels_<isa>.cpp after its fp4_widen header.
//
// Lanes are heads. The query, rounded to bf16, is laid out once per call by dimension: row d of
// the layout holds every head's element d (heads padded with zeros to whole groups of
// kIndexerGroup vectors). A key's dimensions (levels with bf16 dot products: pairs of them,
// V::DotPolicy) are then broadcast one by one against those rows, each head's dot product growing
// in its lane, so that a key costs one reduction over its heads instead of one per head:
//   t = sum over head vectors v in order of w_v * max(acc_v, 0)  (lane-wise, FMA; a padded head
//       adds an exact 0),   score = V::hsum(t).
// FP4 and fp8 codes are widened exactly first (FP4 by Fp4Widen<V>; to bf16 for the pair form, to
// f32 for the FMA form, as bf16 keys are), a register tile's keys at a time; an fp8 key's dot
// products are then scaled by its scale before relu (acc * s, one rounding). Per key, the operations depend only
// on the query, the weights, the key and the shape: never on which keys share a call or a tile,
// nor on the thread.
#pragma once

#ifdef __AVX512BF16__
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/aligned_vector.h"
#include "core/dtype.h"
#include "kernels/cpu/fp4_kernels.h"
#include "kernels/ops.h"

namespace deepinfer::cpu {
namespace {

constexpr int kIndexerGroup = 4;  // head vectors per register group
constexpr int kIndexerKeys = 4;   // keys per register tile

template <class V>
int64_t indexer_padded_heads(int n_heads) {
  constexpr int64_t g = int64_t(kIndexerGroup) * V::kW;
  return (n_heads + g - 1) / g * g;
}

// Key e's bytes; FP4: its scale bytes after the nibbles; fp8: its scale after the codes, else 1.
inline const uint8_t* key_bytes(const IndexerScoresParams& p, int64_t e) { return static_cast<const uint8_t*>(p.keys[e]); }
inline const uint8_t* fp4_key_scales(const IndexerScoresParams& p, int64_t e) { return key_bytes(p, e) + p.dim / 2; }
inline float key_scale(const IndexerScoresParams& p, int64_t e) {
  float s = 1.0f;
  if (p.key_dtype == DType::F8_E4M3) std::memcpy(&s, key_bytes(p, e) + p.dim, 4);
  return s;
}

// t[e] += w_v * relu(acc[e][v]) (acc times key e's scale first for fp8 keys) over a group's head
// vectors v in order; w: the group's first head weight.
template <class V, int E>
__attribute__((always_inline)) inline void close_head_group(typename V::F (&acc)[E][kIndexerGroup], bool scaled,
                                                            const float (&scale)[E], const float* w,
                                                            typename V::F (&t)[E]) {
#pragma GCC unroll 4
  for (int e = 0; e < E; ++e)
#pragma GCC unroll 4
    for (int v = 0; v < kIndexerGroup; ++v) {
      const typename V::F dot = scaled ? V::mul(acc[e][v], V::bcast(scale[e])) : acc[e][v];
      t[e] = V::fma(V::max(dot, V::zero()), V::load(w + v * V::kW), t[e]);
    }
}

// scores[e0 + e], e < E: per group g of head vectors, dots(g, acc) adds the keys' dot products
// with the group's heads to acc (from zero), then close_head_group; V::hsum of the sums.
template <class V, int E, class Dots>
__attribute__((always_inline)) inline void score_tile(const IndexerScoresParams& p, int64_t e0, int64_t hp,
                                                      const float* w, Dots&& dots) {
  using F = typename V::F;
  const bool scaled = p.key_dtype == DType::F8_E4M3;
  float scale[E];
  for (int e = 0; e < E; ++e) scale[e] = key_scale(p, e0 + e);
  F t[E];
  for (int e = 0; e < E; ++e) t[e] = V::zero();
  for (int64_t g = 0; g < hp; g += int64_t(kIndexerGroup) * V::kW) {
    F acc[E][kIndexerGroup];
#pragma GCC unroll 4
    for (int e = 0; e < E; ++e)
#pragma GCC unroll 4
      for (int v = 0; v < kIndexerGroup; ++v) acc[e][v] = V::zero();
    dots(g, acc);
    close_head_group<V, E>(acc, scaled, scale, w + g, t);
  }
  for (int e = 0; e < E; ++e) p.scores[e0 + e] = V::hsum(t[e]);
}

// tile.operator()<E>(e0) over keys [e_begin, e_end): register tiles of kIndexerKeys, then one by one.
template <class Tile>
__attribute__((always_inline)) inline void for_key_tiles(int64_t e_begin, int64_t e_end, Tile&& tile) {
  int64_t e = e_begin;
  for (; e + kIndexerKeys <= e_end; e += kIndexerKeys) tile.template operator()<kIndexerKeys>(e);
  for (; e < e_end; ++e) tile.template operator()<1>(e);
}

// The f32 form: layout [dim][hp] of the bf16-rounded query widened (exact), the keys widened to f32
// (exact), products f32 FMAs.
template <class V>
void indexer_score_block_fma(const IndexerScoresParams& p, int64_t e_begin, int64_t e_end) {
  using F = typename V::F;
  const int64_t hp = indexer_padded_heads<V>(p.n_heads), d_len = p.dim;
  thread_local AlignedVector<float> qt, wt, kf;
  qt.assign(size_t(d_len * hp), 0.0f);
  wt.assign(size_t(hp), 0.0f);
  kf.resize(size_t(kIndexerKeys * d_len));
  for (int h = 0; h < p.n_heads; ++h) {
    wt[size_t(h)] = p.head_weights[h];
    for (int64_t d = 0; d < d_len; ++d) qt[size_t(d * hp + h)] = bf16_to_f32(f32_to_bf16(p.q[h * d_len + d]));
  }
  const auto tile = [&]<int E>(int64_t e0) __attribute__((always_inline)) {
    for (int e = 0; e < E; ++e) {
      float* k = kf.data() + e * d_len;
      if (p.key_dtype == DType::F4_E2M1) {
        Fp4Widen<V>::to_f32(key_bytes(p, e0 + e), fp4_key_scales(p, e0 + e), d_len, k);
      } else if (p.key_dtype == DType::F8_E4M3) {
        for (int64_t d = 0; d < d_len; ++d) k[d] = fp8_e4m3_to_f32(key_bytes(p, e0 + e)[d]);
      } else {
        const uint16_t* kb = static_cast<const uint16_t*>(p.keys[e0 + e]);
        for (int64_t d = 0; d < d_len; ++d) k[d] = bf16_to_f32(kb[d]);
      }
    }
    score_tile<V, E>(p, e0, hp, wt.data(), [&](int64_t g, F (&acc)[E][kIndexerGroup]) __attribute__((always_inline)) {
      for (int64_t d = 0; d < d_len; ++d) {
        F qv[kIndexerGroup];
#pragma GCC unroll 4
        for (int v = 0; v < kIndexerGroup; ++v) qv[v] = V::load(qt.data() + d * hp + g + v * V::kW);
#pragma GCC unroll 4
        for (int e = 0; e < E; ++e) {
          const F k = V::bcast(kf[size_t(e * d_len + d)]);
#pragma GCC unroll 4
          for (int v = 0; v < kIndexerGroup; ++v) acc[e][v] = V::fma(k, qv[v], acc[e][v]);
        }
      }
    });
  };
  for_key_tiles(e_begin, e_end, tile);
}

#ifdef __AVX512BF16__
// The bf16 dot-product form (AVX-512 BF16 levels): layout [ceil(dim / 2)][hp] of 32-bit bf16 pairs
// (lane h: the query's elements 2i and 2i + 1 of head h, zero past dim), each key's pair broadcast
// and multiplied by V::DotPolicy (a lane adds its pair of exact products into its accumulator).
template <class V>
void indexer_score_block_pairs(const IndexerScoresParams& p, int64_t e_begin, int64_t e_end) {
  using F = typename V::F;
  using Dot = typename V::DotPolicy;
  const int64_t hp = indexer_padded_heads<V>(p.n_heads), d_len = p.dim, n_pairs = (d_len + 1) / 2;
  thread_local AlignedVector<uint32_t> qp;
  thread_local AlignedVector<float> wt;
  thread_local AlignedVector<uint16_t> kb;  // a tile's FP4 or fp8 keys widened, [kIndexerKeys, dim]
  qp.assign(size_t(n_pairs * hp), 0u);
  wt.assign(size_t(hp), 0.0f);
  kb.resize(size_t(kIndexerKeys * d_len));
  for (int h = 0; h < p.n_heads; ++h) {
    wt[size_t(h)] = p.head_weights[h];
    for (int64_t d = 0; d < d_len; ++d)
      qp[size_t(d / 2 * hp + h)] |= uint32_t(f32_to_bf16(p.q[h * d_len + d])) << (16 * (d % 2));
  }
  const typename V::Fp8Lut lut;
  const auto tile = [&]<int E>(int64_t e0) __attribute__((always_inline)) {
    const uint16_t* key[E];
    for (int e = 0; e < E; ++e) {
      if (p.key_dtype == DType::F4_E2M1) {
        Fp4Widen<V>::to_bf16(key_bytes(p, e0 + e), fp4_key_scales(p, e0 + e), d_len, kb.data() + e * d_len);
        key[e] = kb.data() + e * d_len;
      } else if (p.key_dtype == DType::F8_E4M3) {
        for (int64_t d = 0; d < d_len; d += 64) {
          __m512i w[2];
          V::fp8x64_to_bf16(lut, key_bytes(p, e0 + e) + d, int(std::min<int64_t>(64, d_len - d)), w[0], w[1]);
          for (int h = 0; h < 2 && d + 32 * h < d_len; ++h)  // the 32 elements from d + 32h, the tail masked
            _mm512_mask_storeu_epi16(kb.data() + e * d_len + d + 32 * h,
                                     __mmask32(d_len - d - 32 * h >= 32 ? ~0u : (1u << (d_len - d - 32 * h)) - 1u), w[h]);
        }
        key[e] = kb.data() + e * d_len;
      } else {
        key[e] = static_cast<const uint16_t*>(p.keys[e0 + e]);
      }
    }
    // Key e's pair i as one 32-bit word (the high half zero past dim).
    const auto key_pair = [&](int e, int64_t i) __attribute__((always_inline)) {
      const uint16_t* k = key[e] + 2 * i;
      return 2 * i + 1 < d_len ? uint32_t(k[0]) | (uint32_t(k[1]) << 16) : uint32_t(k[0]);
    };
    score_tile<V, E>(p, e0, hp, wt.data(), [&](int64_t g, F (&acc)[E][kIndexerGroup]) __attribute__((always_inline)) {
      for (int64_t i = 0; i < n_pairs; ++i) {
#pragma GCC unroll 2
        for (int part = 0; part < Dot::kParts; ++part) {
          typename Dot::P qv[kIndexerGroup];
#pragma GCC unroll 4
          for (int v = 0; v < kIndexerGroup; ++v)
            qv[v] = Dot::part(_mm512_load_si512(qp.data() + i * hp + g + v * V::kW), part);
#pragma GCC unroll 4
          for (int e = 0; e < E; ++e) {
            const typename Dot::P k = Dot::part(_mm512_set1_epi32(int(key_pair(e, i))), part);
#pragma GCC unroll 4
            for (int v = 0; v < kIndexerGroup; ++v) acc[e][v] = Dot::madd(acc[e][v], k, qv[v]);
          }
        }
      }
    });
  };
  for_key_tiles(e_begin, e_end, tile);
}
#endif  // __AVX512BF16__

// KernelTable::indexer_score_block: the pair form where V multiplies bf16 pairs, else the f32 one.
template <class V>
void indexer_score_block(const IndexerScoresParams& p, int64_t e_begin, int64_t e_end) {
#ifdef __AVX512BF16__
  if constexpr (requires { typename V::DotPolicy; }) return indexer_score_block_pairs<V>(p, e_begin, e_end);
#endif
  indexer_score_block_fma<V>(p, e_begin, e_end);
}

}  // namespace
}  // namespace deepinfer::cpu
