// FP4 widening on AVX2: the 8 scaled e2m1 magnitudes of a 32-element block are one register
// (exact), VPERMPS looks up each nibble's low 3 bits, and bit 3 becomes the sign. Included only
// by kernels_avx2.cpp.
#pragma once

#include <immintrin.h>

#include "kernels/cpu/fp4_kernels.h"
#include "kernels/cpu/simd_avx2.h"

namespace deepinfer::cpu {
namespace {

template <>
struct Fp4Widen<Avx2> {
  static void to_f32(const uint8_t* packed, const uint8_t* scales, int64_t n, float* out) {
    const __m256 magnitudes = _mm256_loadu_ps(kE2M1ToF32);
    const __m256i sign = _mm256_set1_epi32(int32_t(0x80000000u));
    for (int64_t b = 0; b < n / kFp4Block; ++b) {
      const __m256 table = _mm256_mul_ps(magnitudes, _mm256_set1_ps(kUe8m0ToF32[scales[b]]));
      // Bytes in element order: byte i and byte i >> 4 (the nibble in each low 4 bits), interleaved.
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed + b * 16));
      const __m128i h = _mm_srli_epi16(v, 4);
      const __m128i halves[2] = {_mm_unpacklo_epi8(v, h), _mm_unpackhi_epi8(v, h)};
      for (int q = 0; q < 4; ++q) {
        const __m256i nib = _mm256_cvtepu8_epi32(q % 2 ? _mm_srli_si128(halves[q / 2], 8) : halves[q / 2]);
        const __m256 mag = _mm256_permutevar8x32_ps(table, nib);
        const __m256 sgn = _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(nib, 28), sign));
        _mm256_storeu_ps(out + b * kFp4Block + 8 * q, _mm256_xor_ps(mag, sgn));
      }
    }
  }
};

}  // namespace
}  // namespace deepinfer::cpu
