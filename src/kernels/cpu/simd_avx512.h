// 16-lane f32 vectors on AVX-512 (F, BW, VL). Included only by the *_avx512.cpp kernels, which
// are compiled for AVX-512 and run only where the CPU has it. The lane-count contract shared by
// all simd_*.h: kW lanes; load_n/store_n touch only the first n < kW lanes (others read as 0).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace deepinfer::cpu {

struct Avx512 {
  using F = __m512;
  static constexpr int kW = 16;

  static F zero() { return _mm512_setzero_ps(); }
  static F bcast(float v) { return _mm512_set1_ps(v); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static F load_n(const float* p, int n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static void store_n(float* p, F v, int n) { _mm512_mask_storeu_ps(p, mask(n), v); }
  // Keeps v in a register, so a loaded vector reused by several FMAs is loaded once.
  static F pin(F v) {
    asm("" : "+v"(v));
    return v;
  }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static F min(F a, F b) { return _mm512_min_ps(a, b); }
  static F round(F a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static F scale_pow2(F a, F n) { return _mm512_scalef_ps(a, n); }  // a * 2^n, n integral
  static float hsum(F v) {  // fixed tree: halves added pairwise down to one lane
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
  }
  // Lane 4i + j of the result = hsum(v[i][j]), bit for bit: the same additions as hsum's tree,
  // four vectors' halves (then quarters, pairs, lanes) at a time, 15 additions for 16 sums.
  static F hsum_4x4(const F (&v)[4][4]) {
    F h[4][2], q[4], w[2];
    for (int j = 0; j < 4; ++j)  // lanes l + (l + 8): heads (0, 1) and (2, 3) of key j
      for (int i = 0; i < 2; ++i)
        h[j][i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i][j], v[2 * i + 1][j], 0x44),
                                _mm512_shuffle_f32x4(v[2 * i][j], v[2 * i + 1][j], 0xee));
    for (int j = 0; j < 4; ++j)  // + (l + 4): quarter i holds head i of key j
      q[j] = _mm512_add_ps(_mm512_shuffle_f32x4(h[j][0], h[j][1], 0x88), _mm512_shuffle_f32x4(h[j][0], h[j][1], 0xdd));
    for (int k = 0; k < 2; ++k)  // + (l + 2): per quarter, keys 2k and 2k + 1
      w[k] = _mm512_add_ps(_mm512_shuffle_ps(q[2 * k], q[2 * k + 1], 0x44),
                           _mm512_shuffle_ps(q[2 * k], q[2 * k + 1], 0xee));
    return _mm512_add_ps(_mm512_shuffle_ps(w[0], w[1], 0x88), _mm512_shuffle_ps(w[0], w[1], 0xdd));  // + (l + 1)
  }
  static float hmax(F v) { return _mm512_reduce_max_ps(v); }

  // bf16 -> f32 is exact: the bits go to the high half.
  static F from_bf16(const uint16_t* p) { return widen_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static F from_bf16_n(const uint16_t* p, int n) { return widen_bf16(_mm256_maskz_loadu_epi16(mask(n), p)); }
  static F from_f16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static F from_f16_n(const uint16_t* p, int n) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask(n), p)); }
  // e4m3 -> exactly (value * 2^-8): sign to bit 15, exponent and mantissa to bits 13..7 of an
  // f16, whose exponent bias is 8 more than e4m3's (subnormals included). NaN codes are not
  // preserved; weights and caches hold none.
  static F from_fp8(const uint8_t* p) { return widen_fp8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static F from_fp8_n(const uint8_t* p, int n) { return widen_fp8(_mm_maskz_loadu_epi8(mask(n), p)); }
  // I8_SM -> exactly its value: the magnitude converted, the sign moved to bit 31.
  static F from_i8sm(const uint8_t* p) { return widen_i8sm(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static F from_i8sm_n(const uint8_t* p, int n) { return widen_i8sm(_mm_maskz_loadu_epi8(mask(n), p)); }

 private:
  static __mmask16 mask(int n) { return __mmask16((1u << n) - 1u); }
  static F widen_bf16(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  // Sign-extended to 16 bits and shifted left by 7, the sign lands in bits 15 and 14 and the
  // exponent and mantissa in 13..7; clearing bit 14 leaves the f16.
  static F widen_fp8(__m128i b) {
    const __m256i w = _mm256_slli_epi16(_mm256_cvtepi8_epi16(b), 7);
    return _mm512_cvtph_ps(_mm256_and_si256(w, _mm256_set1_epi16(int16_t(0xbfff))));
  }
  static F widen_i8sm(__m128i b) {
    const __m512i d = _mm512_cvtepu8_epi32(b);
    const __m512 magnitude = _mm512_cvtepi32_ps(_mm512_and_si512(d, _mm512_set1_epi32(0x7f)));
    const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(d, _mm512_set1_epi32(0x80)), 24);
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(magnitude), sign));
  }
};

// Transpose of a 16 x 16 matrix of 32-bit lanes: row(i) gives row i (i < 16), and emit(j, v)
// receives column j (lane i of v: row i's lane j), once for each j. Loads and stores can stand in
// for the rows and columns, so that no more than 32 vectors are ever live.
template <class Row, class Emit>
__attribute__((always_inline)) inline void transpose16_by(Row&& row, Emit&& emit) {
  __m512i r[16], t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; i += 2) {
    const __m512i a = row(i), b = row(i + 1);
    t[i] = _mm512_unpacklo_epi32(a, b);
    t[i + 1] = _mm512_unpackhi_epi32(a, b);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // r[4q + s], 128-bit lane L: rows 4q..4q+3 of column 4L + s. Column 4L + s is lane L of
  // r[s], r[4 + s], r[8 + s], r[12 + s], in that order.
#pragma GCC unroll 16
  for (int s = 0; s < 4; ++s) {
    const __m512i a = _mm512_shuffle_i32x4(r[s], r[4 + s], 0x88), b = _mm512_shuffle_i32x4(r[s], r[4 + s], 0xdd);
    const __m512i c = _mm512_shuffle_i32x4(r[8 + s], r[12 + s], 0x88), d = _mm512_shuffle_i32x4(r[8 + s], r[12 + s], 0xdd);
    emit(s, _mm512_shuffle_i32x4(a, c, 0x88));
    emit(8 + s, _mm512_shuffle_i32x4(a, c, 0xdd));
    emit(4 + s, _mm512_shuffle_i32x4(b, d, 0x88));
    emit(12 + s, _mm512_shuffle_i32x4(b, d, 0xdd));
  }
}

}  // namespace deepinfer::cpu
