// FP4 widening on AVX-512 with BF16 and VBMI, from each block's scaled values (kFp4BlockValues).
// To f32: VPMULTISHIFTQB puts each nibble in the low bits of a dword index for VPERMPS. To bf16
// (bf16 activations): VPERMW looks up word 2n or 2n + 1 (both the bf16 of value n) for nibble n,
// the word indices from one VPMULTISHIFTQB reading bits 4l - 1 .. 4l + 6 of the block for word l
// (nibble l shifted up by one over one bit of the nibble below). Included only by
// kernels_avx512bf16.cpp.
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
// The same for f32 lookups: dword l (byte 4l) starts at bit 4l of its qword (the half's 16 nibbles).
constexpr Fp4WordShifts make_fp4_dword_shifts() {
  Fp4WordShifts t{};
  for (int l = 0; l < 16; ++l) t.bits[4 * l] = uint8_t(4 * l % 64);
  return t;
}
inline constexpr Fp4WordShifts kFp4DwordShifts = make_fp4_dword_shifts();

template <class Dot>
struct Fp4Widen<Avx512Bf16With<Dot>> {
  // w[h] = elements [16 h, 16 h + 16) of the 32-element block at p16 (16 bytes) with scale byte e,
  // as f32 (exact): VPMULTISHIFTQB moves nibble l of each half's qword to the low bits of dword l,
  // VPERMPS looks it up in the block's scaled values.
  static void widen(const uint8_t* p16, uint8_t e, __m512 (&w)[2]) {
    const __m512 table = _mm512_load_ps(kFp4BlockValues[e].f32);
    const __m512i control = _mm512_load_si512(kFp4DwordShifts.bits);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m512i q = _mm512_broadcastq_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p16 + 8 * h)));
      w[h] = _mm512_permutexvar_ps(_mm512_multishift_epi64_epi8(control, q), table);
    }
  }

  // acc[i][j] += x[i][32 b, 32 b + 32) . W_j's block b as bf16, lane-wise pairs as Dot adds them
  // (Avx512Bf16With's bf16 dot steps), for i < MR.
  template <int MR>
  static void dot_block_bf16(const uint16_t* const* x, const uint8_t* const (&packed)[4],
                             const uint8_t* const (&scales)[4], int64_t b, __m512 (&acc)[MR][4]) {
    __m512i w[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) w[j] = block_bf16(packed[j] + b * 16, scales[j][b]);
#pragma GCC unroll 2
    for (int p = 0; p < Dot::kParts; ++p) {
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        const typename Dot::P xv = Dot::part(_mm512_loadu_si512(x[i] + b * kFp4Block), p);
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) acc[i][j] = Dot::madd(acc[i][j], xv, Dot::part(w[j], p));
      }
    }
  }

  // The 32-element block at p16 with scale byte e as bf16 (exact; see to_bf16).
  static __m512i block_bf16(const uint8_t* p16, uint8_t e) {
    const __m512i qwords = _mm512_set_epi64(1, 1, 1, 1, 0, 0, 0, 0);  // word l reads the block's qword l / 16
    const __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p16)));
    const __m512i index = _mm512_multishift_epi64_epi8(_mm512_load_si512(kFp4WordShifts.bits), _mm512_permutexvar_epi64(qwords, v));
    return _mm512_permutexvar_epi16(index, _mm512_load_si512(kFp4BlockValues[e].bf16_pairs));
  }

  // out[j] = the bf16 of E2M1(nibble j) * 2^(scales[j / 32] - 127) (exact).
  static void to_bf16(const uint8_t* packed, const uint8_t* scales, int64_t n, uint16_t* out) {
    for (int64_t b = 0; b < n / kFp4Block; ++b) _mm512_storeu_si512(out + b * kFp4Block, block_bf16(packed + b * 16, scales[b]));
  }
  // out[j] = E2M1(nibble j) * 2^(scales[j / 32] - 127) as f32 (exact).
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
