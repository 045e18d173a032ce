// FP4 widening on AVX-512 (F, BW): each 32-element block's 16 scaled e2m1 values are one register
// (the value table times the block's power of two, exact), and VPERMPS looks each nibble up in it.
// Included only by kernels_avx512.cpp.
#pragma once

#include <immintrin.h>

#include "kernels/cpu/fp4_kernels.h"
#include "kernels/cpu/simd_avx512.h"

namespace deepinfer::cpu {
namespace {

template <>
struct Fp4Widen<Avx512> {
  static void to_f32(const uint8_t* packed, const uint8_t* scales, int64_t n, float* out) {
    const __m512 values = _mm512_loadu_ps(kE2M1ToF32);
    for (int64_t b = 0; b < n / kFp4Block; ++b) {
      const __m512 table = _mm512_mul_ps(values, _mm512_set1_ps(kUe8m0ToF32[scales[b]]));
      // Bytes in element order: byte i and byte i >> 4 (the nibble in each low 4 bits), interleaved.
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed + b * 16));
      const __m128i h = _mm_srli_epi16(v, 4);
      _mm512_storeu_ps(out + b * kFp4Block, _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(v, h)), table));
      _mm512_storeu_ps(out + b * kFp4Block + 16,
                       _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(v, h)), table));
    }
  }
};

}  // namespace
}  // namespace deepinfer::cpu
