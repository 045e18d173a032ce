// The value sums of expanded MLA attention as bf16 pair dot products (VDPBF16PS) on AVX-512 BF16:
// ExpandedPairValues<Avx512Bf16> (see mla_expanded_attention_kernels.h), with the scores too.
// Lane c of a value accumulator adds p[2u] v[2u][c] + p[2u+1] v[2u+1][c] for the block's pairs u
// in order, the weights' pair broadcast to every lane; lane t of a score accumulator adds query
// pair u times key t's pair u, for u in order. Included only by kernels_avx512bf16.cpp.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/mla_expanded_attention_kernels.h"
#include "kernels/cpu/simd_avx512_bf16.h"

namespace deepinfer::cpu {
namespace {

template <>
struct ExpandedPairValues<Avx512Bf16> {
  static constexpr bool kEnabled = true;

  // scores[i][t] = scale * sum over pairs u in order of q[i] pair u . keys[t] pair u, for 4 query
  // rows (bf16, n_pairs pairs; short tiles repeat their last) and the block's keys packed
  // [kAttendKeyBlock / 16][n_pairs][16][2]; rows < n_hb stored.
  static void scores(const uint16_t* const* q, const uint16_t* keys, int n_pairs, float scale, float* scores,
                     int n_hb) {
    constexpr int T = kAttendKeyBlock, NG = T / 16;
    __m512 acc[4][NG];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NG; ++j) acc[i][j] = _mm512_setzero_ps();
    for (int u = 0; u < n_pairs; ++u) {
      __m512bh kv[NG];
#pragma GCC unroll 4
      for (int j = 0; j < NG; ++j) kv[j] = __m512bh(_mm512_loadu_si512(keys + (size_t(j) * n_pairs + u) * 32));
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        uint32_t pair;
        std::memcpy(&pair, q[i] + 2 * u, 4);
        const __m512bh qv = __m512bh(_mm512_set1_epi32(int(pair)));
#pragma GCC unroll 4
        for (int j = 0; j < NG; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], qv, kv[j]);
      }
    }
    const __m512 sc = _mm512_set1_ps(scale);
    for (int i = 0; i < n_hb; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NG; ++j) _mm512_storeu_ps(scores + size_t(i) * T + j * 16, _mm512_mul_ps(acc[i][j], sc));
  }

  // p: 4 rows of kAttendKeyBlock bf16 weights (short tiles repeat their last); o: the rows'
  // accumulators [n_cols]; only rows < n_hb are stored.
  static void accumulate(const uint16_t* const* p, const uint16_t* pairs, int64_t ld_pair, int n_cols,
                         float* const* o, const float* alpha, int n_hb) {
    constexpr int NC = 4, W = 16;
    for (int cb = 0; cb < n_cols; cb += NC * W) {
      __mmask16 mk[NC];
#pragma GCC unroll 4
      for (int j = 0; j < NC; ++j) {
        const int n = std::clamp(n_cols - cb - j * W, 0, W);
        mk[j] = __mmask16((1u << n) - 1u);
      }
      __m512 acc[4][NC];
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        const __m512 a = _mm512_set1_ps(alpha[i]);
#pragma GCC unroll 4
        for (int j = 0; j < NC; ++j) acc[i][j] = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk[j], o[i] + cb + j * W), a);
      }
      for (int u = 0; u < kAttendKeyBlock / 2; ++u) {
        const uint16_t* row = pairs + int64_t(u) * ld_pair + int64_t(cb) * 2;
        __m512bh vv[NC];
#pragma GCC unroll 4
        for (int j = 0; j < NC; ++j) vv[j] = __m512bh(_mm512_maskz_loadu_epi32(mk[j], row + j * W * 2));
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) {
          uint32_t pair;
          std::memcpy(&pair, p[i] + 2 * u, 4);
          const __m512bh pv = __m512bh(_mm512_set1_epi32(int(pair)));
#pragma GCC unroll 4
          for (int j = 0; j < NC; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], pv, vv[j]);
        }
      }
      for (int i = 0; i < n_hb; ++i)
#pragma GCC unroll 4
        for (int j = 0; j < NC; ++j) _mm512_mask_storeu_ps(o[i] + cb + j * W, mk[j], acc[i][j]);
    }
  }
};

}  // namespace
}  // namespace deepinfer::cpu
