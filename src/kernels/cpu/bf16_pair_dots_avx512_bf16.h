// Bf16PairDots<Avx512Bf16> (bf16_pair_dots.h): bf16 pair dot products (VDPBF16PS) on AVX-512
// BF16, for the scores and value sums of the absorbed and the expanded MLA attention.
// Lane c of a value accumulator adds p[2u] v[2u][c] + p[2u+1] v[2u+1][c] for the block's pairs u
// in order, the weights' pair broadcast to every lane; lane t of a score accumulator adds query
// pair u times key t's pair u, for u in order. Included only by kernels_avx512bf16.cpp.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/bf16_pair_dots.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/simd_avx512_bf16.h"

namespace deepinfer::cpu {
namespace {

template <>
struct Bf16PairDots<Avx512Bf16> {
  static constexpr bool kEnabled = true;

  // acc[i][j] += pair u of row r[i], broadcast to every lane, times v[j] (VDPBF16PS), for 4 rows.
  // The operands are held as __m512i and cast at the instruction: arrays of __m512bh stay in
  // memory.
  template <int N>
  __attribute__((always_inline)) static void broadcast_pair_step(const uint16_t* const* r, int u, const __m512i (&v)[N],
                                                                 __m512 (&acc)[4][N]) {
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      uint32_t pair;
      std::memcpy(&pair, r[i] + 2 * u, 4);
      const __m512bh rv = __m512bh(_mm512_set1_epi32(int(pair)));
#pragma GCC unroll 4
      for (int j = 0; j < N; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], rv, __m512bh(v[j]));
    }
  }

  // scores[i][t] = scale * sum over pairs u in order of q[i] pair u . keys[t] pair u, for 4 query
  // rows (bf16, n_pairs pairs; short tiles repeat their last) and the block's keys packed
  // [kAttendKeyBlock / 16][n_pairs][16][2]; rows < n_hb stored.
  __attribute__((noinline)) static void scores(const uint16_t* const* q, const uint16_t* keys, int n_pairs,
                                               float scale, float* scores, int n_hb) {
    constexpr int T = kAttendKeyBlock, NG = T / 16;
    __m512 acc[4][NG];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NG; ++j) acc[i][j] = _mm512_setzero_ps();
    for (int u = 0; u < n_pairs; ++u) {
      __m512i kv[NG];
#pragma GCC unroll 4
      for (int j = 0; j < NG; ++j) kv[j] = _mm512_loadu_si512(keys + (size_t(j) * n_pairs + u) * 32);
      broadcast_pair_step(q, u, kv, acc);
    }
    const __m512 sc = _mm512_set1_ps(scale);
    // Unrolled over all 4 rows with the test inside: a loop bounded by n_hb would keep the
    // accumulators in memory, stored at every step.
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NG; ++j)
        if (i < n_hb) _mm512_storeu_ps(scores + size_t(i) * T + j * 16, _mm512_mul_ps(acc[i][j], sc));
  }

  // p: 4 rows of 2 n_pairs bf16 weights (short tiles repeat their last); o: the rows'
  // accumulators [n_cols]; only rows < n_hb are stored.
  __attribute__((noinline)) static void accumulate(const uint16_t* const* p, const uint16_t* pairs, int64_t ld_pair,
                                                   int n_cols, int n_pairs, float* const* o, const float* alpha,
                                                   int n_hb) {
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
      for (int u = 0; u < n_pairs; ++u) {
        const uint16_t* row = pairs + int64_t(u) * ld_pair + int64_t(cb) * 2;
        __m512i vv[NC];
#pragma GCC unroll 4
        for (int j = 0; j < NC; ++j) vv[j] = _mm512_maskz_loadu_epi32(mk[j], row + j * W * 2);
        broadcast_pair_step(p, u, vv, acc);
      }
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i)  // all 4 unrolled, as in scores()
#pragma GCC unroll 4
        for (int j = 0; j < NC; ++j)
          if (i < n_hb) _mm512_mask_storeu_ps(o[i] + cb + j * W, mk[j], acc[i][j]);
    }
  }

  // out[2c] = a[c], out[2c + 1] = b ? b[c] : 0 for c < n.
  static void interleave(const uint16_t* a, const uint16_t* b, int n, uint16_t* out) {
    const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6, 37,
                                        5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    for (int c = 0; c < n; c += 32) {
      const __mmask32 mk = n - c >= 32 ? ~__mmask32(0) : __mmask32((1u << (n - c)) - 1u);
      const __m512i va = _mm512_maskz_loadu_epi16(mk, a + c);
      const __m512i vb = b ? _mm512_maskz_loadu_epi16(mk, b + c) : _mm512_setzero_si512();
      const int n2 = std::min(2 * (n - c), 64);
      const __mmask32 m0 = n2 >= 32 ? ~__mmask32(0) : __mmask32((1u << n2) - 1u);
      const __mmask32 m1 = n2 >= 64 ? ~__mmask32(0) : n2 <= 32 ? __mmask32(0) : __mmask32((1u << (n2 - 32)) - 1u);
      _mm512_mask_storeu_epi16(out + 2 * c, m0, _mm512_permutex2var_epi16(va, lo, vb));
      _mm512_mask_storeu_epi16(out + 2 * c + 32, m1, _mm512_permutex2var_epi16(va, hi, vb));
    }
  }
};

}  // namespace
}  // namespace deepinfer::cpu
