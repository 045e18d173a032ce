// AVX-512 with the BF16 extension: the Avx512 vectors, plus the bf16 x bf16 dot-product tile
// that bf16 activations against bf16 weights run on (VDPBF16PS: 32 products per instruction,
// twice the f32 FMA rate). Included only by kernels_avx512bf16.cpp, compiled for it and run
// only where the CPU has it.
//
// Rounding: VCVTNEPS2BF16 rounds to nearest even and, like VDPBF16PS, treats denormal inputs
// as zero; products are exact and each lane accumulates its pair of products in f32.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/simd_avx512.h"

namespace deepinfer::cpu {

struct Avx512Bf16 : Avx512 {
  static constexpr bool kBf16Dot = true;
  static constexpr int kPairs = 32;  // bf16 elements per dot-product step

  // out[i * 4 + j] = dot(x[i][0, k_len), w[j][0, k_len)) for i < MR, j < 4; x and w bf16.
  // Lane l of each accumulator sums elements 32s + 2l and 32s + 2l + 1 over steps s in order,
  // then the lanes are added by Avx512::hsum: the order depends only on k_len.
  template <int MR, class Row>
  static void bf16_dot_tile(const uint16_t* const* x, const Row* w, int64_t k_len, float* out) {
    constexpr int NR = 4;
    const uint16_t* wd[NR] = {w[0].data, w[1].data, w[2].data, w[3].data};
    __m512 acc[MR][NR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
    bf16_dot_accumulate<MR, NR>(x, wd, k_len, acc);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) out[i * NR + j] = hsum(acc[i][j]);
  }

  // acc[i][j] += the lane-wise pair sums of a[i][0, n) . b[j][0, n), bf16 inputs, in 32-element
  // steps (a masked last step).
  template <int MR, int NR>
  static void bf16_dot_accumulate(const uint16_t* const* a, const uint16_t* const* b, int64_t n,
                                  __m512 (&acc)[MR][NR]) {
    int64_t k = 0;
    for (; k + kPairs <= n; k += kPairs) {
      __m512bh bv[NR];
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) bv[j] = load_bh(b[j] + k);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        const __m512bh av = load_bh(a[i] + k);
#pragma GCC unroll 4
        for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], av, bv[j]);
      }
    }
    if (k < n) {
      const __mmask32 mk = __mmask32((uint64_t(1) << (n - k)) - 1);
      __m512bh bv[NR];
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) bv[j] = load_bh_n(b[j] + k, mk);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        const __m512bh av = load_bh_n(a[i] + k, mk);
#pragma GCC unroll 4
        for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], av, bv[j]);
      }
    }
  }

  // y[i] = x[i] rounded to bf16, i < n.
  static void round_to_bf16(const float* x, uint16_t* y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), m256i(_mm512_cvtneps_pbh(_mm512_loadu_ps(x + i))));
    if (i < n) {
      const __mmask16 mk = __mmask16((1u << (n - i)) - 1u);
      _mm256_mask_storeu_epi16(y + i, mk, m256i(_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mk, x + i))));
    }
  }

 private:
  static __m512bh load_bh(const uint16_t* p) { return __m512bh(_mm512_loadu_si512(p)); }
  static __m512bh load_bh_n(const uint16_t* p, __mmask32 mk) { return __m512bh(_mm512_maskz_loadu_epi16(mk, p)); }
  static __m256i m256i(__m256bh v) { return __m256i(v); }
};

}  // namespace deepinfer::cpu
