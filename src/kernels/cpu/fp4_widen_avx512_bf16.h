// FP4 widening to bf16 on AVX-512 with BF16 and VBMI, for bf16 activations: each 32-element block's
// 16 scaled e2m1 values are one f32 register (exact), and VPERMW picks the high half of lane n
// (word 2n + 1: that value's bf16, exact) for each nibble n. The word indices come from one
// VPMULTISHIFTQB, which reads bits 4l - 1 .. 4l + 6 of the block for word l (nibble l shifted up
// by one); bit 0 is then set. Included only by kernels_avx512bf16.cpp.
#pragma once

#include <immintrin.h>

#include "kernels/cpu/fp4_kernels.h"
#include "kernels/cpu/simd_avx512_bf16.h"

namespace deepinfer::cpu {
namespace {

// VPMULTISHIFTQB's control: word l (byte 2l) starts at bit 4 (l % 16) - 1 of its qword.
struct Fp4WordShifts {
  alignas(64) uint8_t bits[64];
};
constexpr Fp4WordShifts make_fp4_word_shifts() {
  Fp4WordShifts t{};
  for (int l = 0; l < 32; ++l) t.bits[2 * l] = uint8_t((4 * (l % 16) + 63) % 64);
  return t;
}
inline constexpr Fp4WordShifts kFp4WordShifts = make_fp4_word_shifts();

template <>
struct Fp4Widen<Avx512Bf16> {
  // out[j] = the bf16 of E2M1(nibble j) * 2^(scales[j / 32] - 127) (exact).
  static void to_bf16(const uint8_t* packed, const uint8_t* scales, int64_t n, uint16_t* out) {
    const __m512 values = _mm512_loadu_ps(kE2M1ToF32);
    const __m512i qwords = _mm512_set_epi64(1, 1, 1, 1, 0, 0, 0, 0);  // word l reads the block's qword l / 16
    const __m512i control = _mm512_load_si512(kFp4WordShifts.bits);
    const __m512i one = _mm512_set1_epi16(1);
    for (int64_t b = 0; b < n / kFp4Block; ++b) {
      const __m512 table = _mm512_mul_ps(values, _mm512_set1_ps(kUe8m0ToF32[scales[b]]));
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed + b * 16));
      const __m512i q = _mm512_permutexvar_epi64(qwords, _mm512_castsi128_si512(v));
      const __m512i index = _mm512_or_si512(_mm512_multishift_epi64_epi8(control, q), one);
      _mm512_storeu_si512(out + b * kFp4Block, _mm512_permutexvar_epi16(index, _mm512_castps_si512(table)));
    }
  }
};

}  // namespace
}  // namespace deepinfer::cpu
