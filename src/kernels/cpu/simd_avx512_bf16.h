// AVX-512 with the BF16 extension (and VBMI): the Avx512 vectors, plus the bf16 x bf16
// dot-product tiles that bf16 activations against bf16, fp8 and FP4 weights run on, in one of two
// arithmetics (the Dot policies below), each its own ISA level (isa.h):
//  - VdpDot (level avx512bf16): VDPBF16PS, 32 products per instruction. On AMD Zen 5 twice the
//    f32 FMA rate; on Intel's AVX-512 BF16 cores (Sapphire/Emerald Rapids) one instruction per
//    two cycles, half the products the two FMA units give (bench/RESULTS.md).
//  - FmaDot (level avx512bf16-fma): each bf16 vector split exactly into its even and odd elements
//    as f32 (a shift and a mask), then two f32 FMAs; about twice VDPBF16PS's products per cycle
//    on those Intel cores.
// fp8 (and I8_SM int8) weights become bf16 exactly through two VPERMI2B byte lookups.
// Included only by kernels_avx512bf16.cpp (and simd_amx.h), compiled for it and run only where the
// CPU has it.
//
// Rounding: VCVTNEPS2BF16 rounds to nearest even and treats denormal inputs as zero (so bf16
// activations are never denormal). Products of two bf16 are exact in f32. VdpDot: each lane adds its
// pair of products into the f32 accumulator (VDPBF16PS, denormal inputs as zero); FmaDot: the even
// product, then the odd one, each with one rounding (fused multiply-add).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/aligned_vector.h"
#include "core/dtype.h"
#include "kernels/cpu/row_tiles.h"
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

// bf16 bits of every I8_SM magnitude (code & 0x7f), the integers 0-127: exact, as bf16 keeps 8
// significant bits.
constexpr uint16_t int_magnitude_to_bf16(int code) {
  if (code == 0) return 0;
  int e = 6;
  while ((code >> e) == 0) --e;  // 2^e <= code < 2^(e+1)
  return uint16_t(((127 + e) << 7) | ((code << (7 - e)) & 0x7f));
}

// Byte tables for VPERMI2B: the high and low byte of each magnitude's bf16, 128 entries each, for
// the sign-and-magnitude byte codes F8_E4M3 and I8_SM.
struct Fp8Bf16Tables {
  alignas(64) uint8_t hi[128];
  alignas(64) uint8_t lo[128];
  alignas(64) uint8_t interleave[2][64];  // bytes 2i, 2i+1 of words [32h, 32h + 32) from lo / hi
};
constexpr Fp8Bf16Tables make_fp8_bf16_tables(uint16_t (*magnitude_to_bf16)(int)) {
  Fp8Bf16Tables t{};
  for (int c = 0; c < 128; ++c) {
    t.hi[c] = uint8_t(magnitude_to_bf16(c) >> 8);
    t.lo[c] = uint8_t(magnitude_to_bf16(c) & 0xff);
  }
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 32; ++i) {
      t.interleave[h][2 * i] = uint8_t(32 * h + i);
      t.interleave[h][2 * i + 1] = uint8_t(64 + 32 * h + i);
    }
  return t;
}
inline constexpr Fp8Bf16Tables kFp8Bf16Tables = make_fp8_bf16_tables(e4m3_magnitude_to_bf16);
inline constexpr Fp8Bf16Tables kInt8SmBf16Tables = make_fp8_bf16_tables(int_magnitude_to_bf16);

// How a lane accumulates its pair of bf16 products. A step splits each raw bf16 vector (32
// elements: 16 lanes x 2) into kParts operands with part(), then acc = madd(acc, a, b) per part,
// part 0 first.
struct VdpDot {
  static constexpr int kParts = 1;
  using P = __m512bh;
  static P part(__m512i v, int) { return __m512bh(v); }
  static __m512 madd(__m512 acc, P a, P b) { return _mm512_dpbf16_ps(acc, a, b); }
};
struct FmaDot {
  static constexpr int kParts = 2;
  using P = __m512;
  // Part 0: the even elements (low halves of the 32-bit lanes) as f32; part 1: the odd ones.
  static P part(__m512i v, int p) {
    return _mm512_castsi512_ps(p == 0 ? _mm512_slli_epi32(v, 16) : _mm512_and_si512(v, _mm512_set1_epi32(int(0xffff0000u))));
  }
  static __m512 madd(__m512 acc, P a, P b) { return _mm512_fmadd_ps(a, b, acc); }
};

template <class Dot>
struct Avx512Bf16With : Avx512 {
  using DotPolicy = Dot;
  static constexpr bool kBf16Dot = true;
  static constexpr int kPairs = 32;  // bf16 elements per dot-product step

  // out[i * 4 + j] = dot(x[i][0, k_len), w[j][0, k_len)) for i < MR, j < 4; w bf16, x bf16 rows
  // (XA uint16_t) or rows split by split_row (XA float, levels with kSplitRows).
  // Lane l of each accumulator sums elements 32s + 2l and 32s + 2l + 1 over steps s in order,
  // then the lanes are added by Avx512::hsum: the order depends only on k_len.
  template <int MR, class Row, class XA>
  static void bf16_dot_tile(const XA* const* x, const Row* w, int64_t k_len, float* out) {
    constexpr int NR = 4;
    const uint16_t* wd[NR] = {w[0].data, w[1].data, w[2].data, w[3].data};
    __m512 acc[MR][NR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
    if constexpr (std::is_same_v<XA, float>) {
      int64_t k = 0;
      for (; k + kPairs <= k_len; k += kPairs) split_step<MR, NR, true>(x, wd, k, 0, acc);
      if (k < k_len) split_step<MR, NR, false>(x, wd, k, __mmask32((uint64_t(1) << (k_len - k)) - 1), acc);
    } else {
      bf16_dot_accumulate<MR, NR>(x, wd, k_len, acc);
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) out[i * NR + j] = hsum(acc[i][j]);
  }

  // Levels whose Dot splits each bf16 vector (FmaDot): activation rows are split once (split_row)
  // and bf16_dot_tile runs on them, rather than converting every row again for every 4 weight
  // rows: once per call by the drivers' packing (gemm_kernels.h's split packing), else once per
  // block and pass (pass_rows). Bitwise the same outputs as bf16_dot_tile on the rows themselves.
  static constexpr bool kSplitRows = Dot::kParts == 2;
  // Floats of one split row: whole 32-element steps.
  static int64_t split_row_floats(int64_t k_len) { return (k_len + kPairs - 1) / kPairs * kPairs; }
  // out[32 s + 16 p + l] = Dot::part(step s of x, p) lane l: step s's even elements (p = 0), then
  // its odd ones (p = 1), as f32; zero past k_len.
  static void split_row(const uint16_t* x, int64_t k_len, float* out) {
    for (int64_t k = 0; k < k_len; k += kPairs) {
      const __m512i v = act_step(x, k, k_len);
#pragma GCC unroll 2
      for (int p = 0; p < Dot::kParts; ++p) _mm512_storeu_ps(out + k + 16 * p, Dot::part(v, p));
    }
  }

  // acc[i][j] += the lane-wise pair sums of a[i][0, n) . b[j][0, n), bf16 inputs, in 32-element
  // steps (a masked last step). Always inlined, so that the caller's accumulators stay in registers
  // (the byte loads may alias them, so a separate function keeps them in memory: a store per
  // product step).
  template <int MR, int NR>
  __attribute__((always_inline)) static void bf16_dot_accumulate(const uint16_t* const* a, const uint16_t* const* b,
                                                                 int64_t n, __m512 (&acc)[MR][NR]) {
    int64_t k = 0;
    for (; k + kPairs <= n; k += kPairs) dot_step<MR, NR, true>(a, b, k, 0, acc);
    if (k < n) dot_step<MR, NR, false>(a, b, k, __mmask32((uint64_t(1) << (n - k)) - 1), acc);
  }

  // One 32-element step of bf16_dot_accumulate (not Full: elements outside mk read as 0). Per
  // part, the weight operands stay in registers over the MR rows (FmaDot reloads the raw vectors
  // for its second part rather than hold both parts: 4 x 6 accumulators leave no room).
  template <int MR, int NR, bool Full>
  __attribute__((always_inline)) static void dot_step(const uint16_t* const* a, const uint16_t* const* b, int64_t k,
                                                      __mmask32 mk, __m512 (&acc)[MR][NR]) {
    const auto load = [mk](const uint16_t* p) { return Full ? _mm512_loadu_si512(p) : load_words_n(p, mk); };
#pragma GCC unroll 2
    for (int p = 0; p < Dot::kParts; ++p) {
      typename Dot::P bv[NR];
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) bv[j] = Dot::part(load(b[j] + k), p);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        const typename Dot::P av = Dot::part(load(a[i] + k), p);
#pragma GCC unroll 4
        for (int j = 0; j < NR; ++j) acc[i][j] = Dot::madd(acc[i][j], av, bv[j]);
      }
    }
  }

  // bf16 elements a one-row split tile prefetches ahead in each weight row.
  static constexpr int64_t kGemvPrefetch = 512;

  // dot_step on split activation rows (the weights as there).
  template <int MR, int NR, bool Full>
  __attribute__((always_inline)) static void split_step(const float* const* a, const uint16_t* const* b, int64_t k,
                                                        __mmask32 mk, __m512 (&acc)[MR][NR]) {
    const auto load = [mk](const uint16_t* p) { return Full ? _mm512_loadu_si512(p) : load_words_n(p, mk); };
    if constexpr (MR == 1)
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) _mm_prefetch(reinterpret_cast<const char*>(b[j] + k + kGemvPrefetch), _MM_HINT_T0);
#pragma GCC unroll 2
    for (int p = 0; p < Dot::kParts; ++p) {
      typename Dot::P bv[NR];
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) bv[j] = Dot::part(load(b[j] + k), p);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        const __m512 av = _mm512_loadu_ps(a[i] + k + 16 * p);
#pragma GCC unroll 4
        for (int j = 0; j < NR; ++j) acc[i][j] = Dot::madd(acc[i][j], av, bv[j]);
      }
    }
  }

  // fp8 (e4m3; or int8 with `codes` I8_SM) weights with per-block scales against bf16 activations: out[i * 4 + j] =
  // sum over scale blocks b of scale_j[b] * dot(x[i], w[j]) restricted to block b, for i < m,
  // j < 4. Every e4m3 value becomes its bf16 exactly (subnormals included; no f32 widening). For
  // each (i, j): lane l of a partial sum accumulates, as Dot adds pairs, from zero, elements
  // 32s + 2l and 32s + 2l + 1 of the block's 32-element steps s (the last step at k_len masked);
  // at the block's end total = fma(partial, scale, total) lane-wise; then hsum. One row converts
  // the weights in registers; more rows convert the 4 weight rows once into a scratch (bf16, or
  // with split activation rows (XA float: split_row) split the same way) and run 2-weight-row
  // tiles over it: the same operations either way, so an output depends only on its activation
  // row and weight row. seg (block_cols) is a multiple of 32.
  template <class Row, class XA>
  static void fp8_dot_rows(const XA* const* x, int64_t m, const Row* w, int64_t k_len, int64_t seg, DType codes,
                           float* out) {
    if (m == 1) return fp8_dot_row(x[0], w, k_len, seg, codes, out);
    const int64_t ld = (k_len + 63) / 64 * 64;
    using WE = std::conditional_t<std::is_same_v<XA, float>, float, uint16_t>;
    thread_local AlignedVector<WE> scratch;  // [4, ld]: the weight rows as bf16 (or split), zero-padded
    if (scratch.size() < size_t(4 * ld)) scratch.resize(size_t(4 * ld));
    const Fp8Lut t(codes);
    for (int j = 0; j < 4; ++j)
      for (int64_t k = 0; k < k_len; k += 64) {
        __m512i wv[2];
        _mm_prefetch(reinterpret_cast<const char*>(w[j].data + k + kFp8Prefetch), _MM_HINT_T0);
        fp8x64_to_bf16(t, w[j].data + k, int(std::min<int64_t>(64, k_len - k)), wv[0], wv[1]);
        WE* dst = scratch.data() + j * ld + k;
        for (int h = 0; h < 2; ++h) {
          if constexpr (std::is_same_v<WE, float>) {
#pragma GCC unroll 2
            for (int p = 0; p < Dot::kParts; ++p) _mm512_storeu_ps(dst + kPairs * h + 16 * p, Dot::part(wv[h], p));
          } else {
            _mm512_storeu_si512(dst + kPairs * h, wv[h]);
          }
        }
      }
    if constexpr (std::is_same_v<WE, float>) {  // split rows: 4-weight-row tiles (twice the bytes per row)
      const float* wb[4] = {scratch.data(), scratch.data() + ld, scratch.data() + 2 * ld, scratch.data() + 3 * ld};
      const float* sc[4] = {w[0].scales, w[1].scales, w[2].scales, w[3].scales};
      for_row_tiles(m, [&]<int MR>(int64_t r) __attribute__((always_inline)) { split_scaled_tile<MR>(x + r, wb, sc, k_len, seg, out + r * 4); });
      return;
    }
    for (int j = 0; j < 4; j += 2) {
      const WE* wb[2] = {scratch.data() + j * ld, scratch.data() + (j + 1) * ld};
      const float* sc[2] = {w[j].scales, w[j + 1].scales};
      for_row_tiles(m, [&]<int MR>(int64_t r) __attribute__((always_inline)) { scaled_tile<MR>(x + r, wb, sc, k_len, seg, out + r * 4 + j); });
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

  // The byte code -> bf16 conversion of F8_E4M3 or I8_SM codes (`codes`; any other dtype reads as
  // F8_E4M3), also used by the amx level's weight panels (amx_weight_rows.h).
  struct Fp8Lut {  // the conversion tables, in registers
    explicit Fp8Lut(DType codes = DType::F8_E4M3) : Fp8Lut(codes == DType::I8_SM ? kInt8SmBf16Tables : kFp8Bf16Tables) {}
    explicit Fp8Lut(const Fp8Bf16Tables& t)
        : hi0(_mm512_load_si512(t.hi)), hi1(_mm512_load_si512(t.hi + 64)), lo0(_mm512_load_si512(t.lo)),
          lo1(_mm512_load_si512(t.lo + 64)), il0(_mm512_load_si512(t.interleave[0])),
          il1(_mm512_load_si512(t.interleave[1])) {}
    __m512i hi0, hi1, lo0, lo1, il0, il1;
    __m512i sign = _mm512_set1_epi8(char(0x80));
  };

  // The codes p[0, n) (n <= 64; the rest read as 0) as bf16: elements [0, 32) in w0,
  // [32, 64) in w1. Two 128-entry byte lookups (VPERMI2B ignores the sign bit), the sign OR-ed
  // into the high byte, two byte interleaves.
  static void fp8x64_to_bf16(const Fp8Lut& t, const uint8_t* p, int n, __m512i& w0, __m512i& w1) {
    fp8x64_to_bf16(t, n == 64 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(__mmask64((uint64_t(1) << n) - 1), p), w0,
                   w1);
  }
  // The same for 64 codes in a register.
  static void fp8x64_to_bf16(const Fp8Lut& t, __m512i b, __m512i& w0, __m512i& w1) {
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
  static __m512i act_step(const uint16_t* row, int64_t k, int64_t k_len) {
    return k + kPairs <= k_len ? _mm512_loadu_si512(row + k) : load_words_n(row + k, __mmask32((uint64_t(1) << (k_len - k)) - 1));
  }

  // Part p of the activation step at k of a row of k_len: a bf16 row converted here, or a split
  // row (split_row) read as split.
  static typename Dot::P act_part(const uint16_t* row, int64_t k, int64_t k_len, int p) {
    return Dot::part(act_step(row, k, k_len), p);
  }
  static __m512 act_part(const float* row, int64_t k, int64_t, int p) { return _mm512_loadu_ps(row + k + 16 * p); }
  // Part p of the weight step at k of a bf16 or split scratch row.
  static typename Dot::P weight_part(const uint16_t* row, int64_t k, int p) { return Dot::part(_mm512_loadu_si512(row + k), p); }
  static __m512 weight_part(const float* row, int64_t k, int p) { return _mm512_loadu_ps(row + k + 16 * p); }

  // fp8_dot_rows for one activation row, converting the 4 weight rows in registers.
  template <class Row, class XA>
  static void fp8_dot_row(const XA* x, const Row* w, int64_t k_len, int64_t seg, DType codes, float* out) {
    constexpr int NR = 4;
    const Fp8Lut t(codes);
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
#pragma GCC unroll 2
        for (int p = 0; p < Dot::kParts; ++p) {
          const typename Dot::P ap = act_part(x, kk, k_len, p);
#pragma GCC unroll 4
          for (int j = 0; j < NR; ++j) part[j] = Dot::madd(part[j], ap, Dot::part(wv[j][h], p));
        }
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

  // MR activation rows against 2 weight rows wb (bf16, or split for split activation rows;
  // zero-padded to a multiple of 64) with their block scales; out[i * 4 + j] for i < MR, j < 2.
  // The per-output sequence of fp8_dot_row.
  template <int MR, class XA, class WE>
  static void scaled_tile(const XA* const* x, const WE* const (&wb)[2], const float* const (&sc)[2], int64_t k_len,
                          int64_t seg, float* out) {
    __m512 part[MR][2], total[MR][2];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) part[i][0] = part[i][1] = total[i][0] = total[i][1] = _mm512_setzero_ps();
    const int64_t steps_per_block = seg / kPairs;
    int64_t step = 0;
    for (int64_t k = 0; k < k_len; k += kPairs) {
#pragma GCC unroll 2
      for (int p = 0; p < Dot::kParts; ++p) {
        const typename Dot::P b0 = weight_part(wb[0], k, p), b1 = weight_part(wb[1], k, p);
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
          const typename Dot::P a = act_part(x[i], k, k_len, p);
          part[i][0] = Dot::madd(part[i][0], a, b0);
          part[i][1] = Dot::madd(part[i][1], a, b1);
        }
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

  // scaled_tile for split activation rows against 4 split weight rows: MR x 4 partial sums in
  // registers, the totals in memory (updated once per scale block), so that each activation vector
  // feeds 4 products. The per-output sequence of fp8_dot_row.
  template <int MR>
  static void split_scaled_tile(const float* const* x, const float* const (&wb)[4], const float* const (&sc)[4],
                                int64_t k_len, int64_t seg, float* out) {
    __m512 part[MR][4];
    alignas(64) float total[MR][4][16] = {};
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) part[i][j] = _mm512_setzero_ps();
    const int64_t steps_per_block = seg / kPairs;
    int64_t step = 0, blk = 0;
    for (int64_t k = 0; k < k_len; k += kPairs) {
#pragma GCC unroll 2
      for (int p = 0; p < Dot::kParts; ++p) {
        __m512 b[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) b[j] = weight_part(wb[j], k, p);
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
          const __m512 a = act_part(x[i], k, k_len, p);
#pragma GCC unroll 4
          for (int j = 0; j < 4; ++j) part[i][j] = Dot::madd(part[i][j], a, b[j]);
        }
      }
      if (++step == steps_per_block || k + kPairs >= k_len) {
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) {
          const __m512 s = _mm512_set1_ps(sc[j][blk]);
#pragma GCC unroll 16
          for (int i = 0; i < MR; ++i) {
            _mm512_store_ps(total[i][j], _mm512_fmadd_ps(part[i][j], s, _mm512_load_ps(total[i][j])));
            part[i][j] = _mm512_setzero_ps();
          }
        }
        step = 0;
        ++blk;
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) out[i * 4 + j] = hsum(_mm512_load_ps(total[i][j]));
  }

  static __m512i load_words_n(const uint16_t* p, __mmask32 mk) { return _mm512_maskz_loadu_epi16(mk, p); }
  static __m256i m256i(__m256bh v) { return __m256i(v); }
};

using Avx512Bf16 = Avx512Bf16With<VdpDot>;
using Avx512Bf16Fma = Avx512Bf16With<FmaDot>;

}  // namespace deepinfer::cpu
