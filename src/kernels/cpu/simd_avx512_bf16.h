// AVX-512 with the BF16 extension (and VBMI): the Avx512 vectors, plus the bf16 x bf16
// dot-product tiles that bf16 activations against bf16 or fp8 weights run on (VDPBF16PS: 32
// products per instruction; measured at twice the f32 FMA rate on AMD Zen 5, about the same on
// an AMX-era Intel Xeon: bench/RESULTS.md). fp8 weights become bf16 exactly through two VPERMI2B
// byte lookups.
// Included only by kernels_avx512bf16.cpp, compiled for it and run only where the CPU has it.
//
// Rounding: VCVTNEPS2BF16 rounds to nearest even and, like VDPBF16PS, treats denormal inputs
// as zero; products are exact and each lane accumulates its pair of products in f32.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "kernels/cpu/simd_avx512.h"

namespace deepinfer::cpu {

// bf16 bits of every e4m3 magnitude (code & 0x7f), exact (subnormals included): e4m3 has 3
// mantissa bits and exponents 2^-9..2^8, all inside bf16. Code 0x7f (NaN) maps to 480; weights
// hold no NaN.
constexpr uint16_t e4m3_magnitude_to_bf16(int code) {
  const int e = code >> 3, m = code & 7;
  if (e > 0) return uint16_t(((e + 120) << 7) | (m << 4));  // 2^(e-7) * (1 + m/8)
  if (m == 0) return 0;
  int shift = 0;  // m * 2^-9, normalized: the mantissa's leading one moves to bit 3
  while (((m << shift) & 8) == 0) ++shift;
  return uint16_t(((121 - shift) << 7) | (((m << shift) & 7) << 4));
}

// Byte tables for VPERMI2B: the high and low byte of each magnitude's bf16, 128 entries each.
struct Fp8Bf16Tables {
  alignas(64) uint8_t hi[128];
  alignas(64) uint8_t lo[128];
  alignas(64) uint8_t interleave[2][64];  // bytes 2i, 2i+1 of words [32h, 32h + 32) from lo / hi
};
constexpr Fp8Bf16Tables make_fp8_bf16_tables() {
  Fp8Bf16Tables t{};
  for (int c = 0; c < 128; ++c) {
    t.hi[c] = uint8_t(e4m3_magnitude_to_bf16(c) >> 8);
    t.lo[c] = uint8_t(e4m3_magnitude_to_bf16(c) & 0xff);
  }
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 32; ++i) {
      t.interleave[h][2 * i] = uint8_t(32 * h + i);
      t.interleave[h][2 * i + 1] = uint8_t(64 + 32 * h + i);
    }
  return t;
}
inline constexpr Fp8Bf16Tables kFp8Bf16Tables = make_fp8_bf16_tables();

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

  // fp8 (e4m3) weights with per-block scales against bf16 activations: out[i * 4 + j] =
  // sum over scale blocks b of scale_j[b] * dot(x[i], w[j]) restricted to block b, for i < m,
  // j < 4. Every e4m3 value becomes its bf16 exactly (subnormals included; no f32 widening). For
  // each (i, j): lane l of a partial sum accumulates, with VDPBF16PS from zero, elements
  // 32s + 2l and 32s + 2l + 1 of the block's 32-element steps s (the last step at k_len masked);
  // at the block's end total = fma(partial, scale, total) lane-wise; then hsum. One row converts
  // the weights in registers; more rows convert the 4 weight rows once into a bf16 scratch and
  // run 2-weight-row tiles over it: the same operations either way, so an output depends only on
  // its activation row and weight row. seg (block_cols) is a multiple of 32.
  template <class Row>
  static void fp8_dot_rows(const uint16_t* const* x, int64_t m, const Row* w, int64_t k_len, int64_t seg,
                           float* out) {
    if (m == 1) return fp8_dot_row(x[0], w, k_len, seg, out);
    const int64_t ld = (k_len + 63) / 64 * 64;
    thread_local std::vector<uint16_t> scratch;  // [4, ld]: the weight rows as bf16, zero-padded
    if (scratch.size() < size_t(4 * ld)) scratch.resize(size_t(4 * ld));
    const Fp8Lut t;
    for (int j = 0; j < 4; ++j)
      for (int64_t k = 0; k < k_len; k += 64) {
        __m512i w0, w1;
        _mm_prefetch(reinterpret_cast<const char*>(w[j].data + k + kFp8Prefetch), _MM_HINT_T0);
        fp8x64_to_bf16(t, w[j].data + k, int(std::min<int64_t>(64, k_len - k)), w0, w1);
        _mm512_storeu_si512(scratch.data() + j * ld + k, w0);
        _mm512_storeu_si512(scratch.data() + j * ld + k + 32, w1);
      }
    for (int j = 0; j < 4; j += 2) {
      const uint16_t* wb[2] = {scratch.data() + j * ld, scratch.data() + (j + 1) * ld};
      const float* sc[2] = {w[j].scales, w[j + 1].scales};
      int64_t r = 0;
      for (; m - r >= 9 || m - r == 6; r += 6) scaled_tile<6>(x + r, wb, sc, k_len, seg, out + r * 4 + j);
      if (m - r >= 7) {
        scaled_tile<4>(x + r, wb, sc, k_len, seg, out + r * 4 + j);
        r += 4;
      }
      switch (m - r) {
        case 5: scaled_tile<5>(x + r, wb, sc, k_len, seg, out + r * 4 + j); break;
        case 4: scaled_tile<4>(x + r, wb, sc, k_len, seg, out + r * 4 + j); break;
        case 3: scaled_tile<3>(x + r, wb, sc, k_len, seg, out + r * 4 + j); break;
        case 2: scaled_tile<2>(x + r, wb, sc, k_len, seg, out + r * 4 + j); break;
        case 1: scaled_tile<1>(x + r, wb, sc, k_len, seg, out + r * 4 + j); break;
        default: break;
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

  // The e4m3 -> bf16 conversion, also used by the amx level's weight panels (amx_weight_rows.h).
  struct Fp8Lut {  // the conversion tables, in registers
    __m512i hi0 = _mm512_load_si512(kFp8Bf16Tables.hi), hi1 = _mm512_load_si512(kFp8Bf16Tables.hi + 64);
    __m512i lo0 = _mm512_load_si512(kFp8Bf16Tables.lo), lo1 = _mm512_load_si512(kFp8Bf16Tables.lo + 64);
    __m512i il0 = _mm512_load_si512(kFp8Bf16Tables.interleave[0]);
    __m512i il1 = _mm512_load_si512(kFp8Bf16Tables.interleave[1]);
    __m512i sign = _mm512_set1_epi8(char(0x80));
  };

  // The e4m3 codes p[0, n) (n <= 64; the rest read as 0) as bf16: elements [0, 32) in w0,
  // [32, 64) in w1. Two 128-entry byte lookups (VPERMI2B ignores the sign bit), the sign OR-ed
  // into the high byte, two byte interleaves.
  static void fp8x64_to_bf16(const Fp8Lut& t, const uint8_t* p, int n, __m512i& w0, __m512i& w1) {
    const __m512i b = n == 64 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(__mmask64((uint64_t(1) << n) - 1), p);
    const __m512i lo = _mm512_permutex2var_epi8(t.lo0, b, t.lo1);
    const __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(t.hi0, b, t.hi1), b, t.sign, 0xF8);
    w0 = _mm512_permutex2var_epi8(lo, t.il0, hi);
    w1 = _mm512_permutex2var_epi8(lo, t.il1, hi);
  }

 private:
  // How far ahead of the conversion each fp8 weight stream is prefetched: the byte permutes
  // leave too few loads in flight for the hardware prefetcher alone (one core streamed
  // 10 GB/s without, 14 GB/s with, as fast as bf16 weights).
  static constexpr int64_t kFp8Prefetch = 1024;

  // Activations [k, k + 32) of a row of k_len, the part past k_len as 0.
  static __m512bh act_step(const uint16_t* row, int64_t k, int64_t k_len) {
    return k + kPairs <= k_len ? load_bh(row + k) : load_bh_n(row + k, __mmask32((uint64_t(1) << (k_len - k)) - 1));
  }

  // fp8_dot_rows for one activation row, converting the 4 weight rows in registers.
  template <class Row>
  static void fp8_dot_row(const uint16_t* x, const Row* w, int64_t k_len, int64_t seg, float* out) {
    constexpr int NR = 4;
    const Fp8Lut t;
    __m512 part[NR], total[NR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) part[j] = total[j] = _mm512_setzero_ps();
    const int64_t steps_per_block = seg / kPairs;
    int64_t step = 0;
    for (int64_t k = 0; k < k_len; k += 64) {
      __m512i wv[NR][2];
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) {
        _mm_prefetch(reinterpret_cast<const char*>(w[j].data + k + kFp8Prefetch), _MM_HINT_T0);
        fp8x64_to_bf16(t, w[j].data + k, int(std::min<int64_t>(64, k_len - k)), wv[j][0], wv[j][1]);
      }
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const int64_t kk = k + kPairs * h;
        if (kk >= k_len) break;
        const __m512bh a = act_step(x, kk, k_len);
#pragma GCC unroll 4
        for (int j = 0; j < NR; ++j) part[j] = _mm512_dpbf16_ps(part[j], a, __m512bh(wv[j][h]));
        if (++step == steps_per_block || kk + kPairs >= k_len) {
          const int64_t b = kk / seg;
#pragma GCC unroll 4
          for (int j = 0; j < NR; ++j) {
            total[j] = _mm512_fmadd_ps(part[j], _mm512_set1_ps(w[j].scales[b]), total[j]);
            part[j] = _mm512_setzero_ps();
          }
          step = 0;
        }
      }
    }
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) out[j] = hsum(total[j]);
  }

  // MR activation rows against 2 bf16 weight rows wb (zero-padded to a multiple of 64) with
  // their block scales; out[i * 4 + j] for i < MR, j < 2. The per-output sequence of
  // fp8_dot_row.
  template <int MR>
  static void scaled_tile(const uint16_t* const* x, const uint16_t* const (&wb)[2], const float* const (&sc)[2],
                          int64_t k_len, int64_t seg, float* out) {
    __m512 part[MR][2], total[MR][2];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) part[i][0] = part[i][1] = total[i][0] = total[i][1] = _mm512_setzero_ps();
    const int64_t steps_per_block = seg / kPairs;
    int64_t step = 0;
    for (int64_t k = 0; k < k_len; k += kPairs) {
      const __m512bh b0 = load_bh(wb[0] + k), b1 = load_bh(wb[1] + k);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        const __m512bh a = act_step(x[i], k, k_len);
        part[i][0] = _mm512_dpbf16_ps(part[i][0], a, b0);
        part[i][1] = _mm512_dpbf16_ps(part[i][1], a, b1);
      }
      if (++step == steps_per_block || k + kPairs >= k_len) {
        const int64_t b = k / seg;
        const __m512 s0 = _mm512_set1_ps(sc[0][b]), s1 = _mm512_set1_ps(sc[1][b]);
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
          total[i][0] = _mm512_fmadd_ps(part[i][0], s0, total[i][0]);
          total[i][1] = _mm512_fmadd_ps(part[i][1], s1, total[i][1]);
          part[i][0] = part[i][1] = _mm512_setzero_ps();
        }
        step = 0;
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      out[i * 4] = hsum(total[i][0]);
      out[i * 4 + 1] = hsum(total[i][1]);
    }
  }

  static __m512bh load_bh(const uint16_t* p) { return __m512bh(_mm512_loadu_si512(p)); }
  static __m512bh load_bh_n(const uint16_t* p, __mmask32 mk) { return __m512bh(_mm512_maskz_loadu_epi16(mk, p)); }
  static __m256i m256i(__m256bh v) { return __m256i(v); }
};

}  // namespace deepinfer::cpu
