// 8-lane f32 vectors on AVX2 + FMA + F16C. Included only by the *_avx2.cpp kernels. Same
// contract as simd_avx512.h.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace deepinfer::cpu {

struct Avx2 {
  using F = __m256;
  static constexpr int kW = 8;

  static F zero() { return _mm256_setzero_ps(); }
  static F bcast(float v) { return _mm256_set1_ps(v); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static F load_n(const float* p, int n) { return _mm256_maskload_ps(p, mask(n)); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static void store_n(float* p, F v, int n) { _mm256_maskstore_ps(p, mask(n), v); }
  // Keeps v in a register, so a loaded vector reused by several FMAs is loaded once.
  static F pin(F v) {
    asm("" : "+x"(v));
    return v;
  }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F min(F a, F b) { return _mm256_min_ps(a, b); }
  static F round(F a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static F scale_pow2(F a, F n) {  // a * 2^n, n integral in [-126, 127]
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(a, _mm256_castsi256_ps(e));
  }
  static float hsum(F v) {
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
  }
  static float hmax(F v) {
    __m128 q = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    q = _mm_max_ps(q, _mm_movehl_ps(q, q));
    q = _mm_max_ss(q, _mm_movehdup_ps(q));
    return _mm_cvtss_f32(q);
  }

  static F from_bf16(const uint16_t* p) { return widen_bf16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static F from_bf16_n(const uint16_t* p, int n) { return widen_bf16(load_u16_n(p, n)); }
  static F from_f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static F from_f16_n(const uint16_t* p, int n) { return _mm256_cvtph_ps(load_u16_n(p, n)); }
  // e4m3 -> exactly (value * 2^-8), as Avx512::from_fp8.
  static F from_fp8(const uint8_t* p) { return widen_fp8(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
  static F from_fp8_n(const uint8_t* p, int n) {
    uint64_t bits = 0;
    std::memcpy(&bits, p, size_t(n));
    return widen_fp8(_mm_cvtsi64_si128(int64_t(bits)));
  }
  // I8_SM -> exactly its value, as Avx512::from_i8sm.
  static F from_i8sm(const uint8_t* p) { return widen_i8sm(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }
  static F from_i8sm_n(const uint8_t* p, int n) {
    uint64_t bits = 0;
    std::memcpy(&bits, p, size_t(n));
    return widen_i8sm(_mm_cvtsi64_si128(int64_t(bits)));
  }

 private:
  static __m256i mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static __m128i load_u16_n(const uint16_t* p, int n) {
    alignas(16) uint16_t tmp[8] = {};
    std::memcpy(tmp, p, size_t(n) * 2);
    return _mm_load_si128(reinterpret_cast<const __m128i*>(tmp));
  }
  static F widen_bf16(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
  static F widen_fp8(__m128i b) {  // as Avx512::widen_fp8
    const __m128i w = _mm_slli_epi16(_mm_cvtepi8_epi16(b), 7);
    return _mm256_cvtph_ps(_mm_and_si128(w, _mm_set1_epi16(int16_t(0xbfff))));
  }
  static F widen_i8sm(__m128i b) {  // as Avx512::widen_i8sm
    const __m256i d = _mm256_cvtepu8_epi32(b);
    const __m256 magnitude = _mm256_cvtepi32_ps(_mm256_and_si256(d, _mm256_set1_epi32(0x7f)));
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(d, _mm256_set1_epi32(0x80)), 24);
    return _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(magnitude), sign));
  }
};

}  // namespace deepinfer::cpu
