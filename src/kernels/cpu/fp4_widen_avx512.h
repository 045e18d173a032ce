// FP4 widening on AVX-512 (F, BW): VPERMPS looks each nibble up in the block's 16 scaled values
// (kFp4BlockValues).
// Included only by kernels_avx512.cpp.
#pragma once

#include <immintrin.h>

#include "kernels/cpu/fp4_kernels.h"
#include "kernels/cpu/simd_avx512.h"

namespace deepinfer::cpu {
namespace {

template <>
struct Fp4Widen<Avx512> {
  // w[h] = elements [16 h, 16 h + 16) of the 32-element block at p16 (16 bytes) with scale byte e,
  // as f32 (exact).
  static void widen(const uint8_t* p16, uint8_t e, __m512 (&w)[2]) {
    const __m512 table = _mm512_load_ps(kFp4BlockValues[e].f32);
    // Bytes in element order: byte i and byte i >> 4 (the nibble in each low 4 bits), interleaved.
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p16));
    const __m128i h = _mm_srli_epi16(v, 4);
    w[0] = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(v, h)), table);
    w[1] = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(v, h)), table);
  }
  // out[j] = the bf16 of the same values (exact: the high halves of their f32 bits).
  static void to_bf16(const uint8_t* packed, const uint8_t* scales, int64_t n, uint16_t* out) {
    for (int64_t b = 0; b < n / kFp4Block; ++b) {
      __m512 w[2];
      widen(packed + b * 16, scales[b], w);
      for (int h = 0; h < 2; ++h)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + b * kFp4Block + 16 * h),
                            _mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(w[h]), 16)));
    }
  }
  static void to_f32(const uint8_t* packed, const uint8_t* scales, int64_t n, float* out) {
    for (int64_t b = 0; b < n / kFp4Block; ++b) {
      __m512 w[2];
      widen(packed + b * 16, scales[b], w);
      _mm512_storeu_ps(out + b * kFp4Block, w[0]);
      _mm512_storeu_ps(out + b * kFp4Block + 16, w[1]);
    }
  }
};

}  // namespace
}  // namespace deepinfer::cpu
