// Kernels for FP4 weights (DType::F4_E2M1: e2m1 nibbles packed two per byte, a UE8M0 scale per 32
// inputs; LinearWeight::scale_e8m0), included by kernels_<isa>.cpp after gemm_kernels.h and the
// ISA's Fp4Widen specialization (fp4_widen_<isa>.h; the primary template below is the scalar one).
//
// Every FP4 value times its power-of-two scale is exact in f32 and in bf16, so the weights are
// widened exactly, and each output gets exactly the operations the same weights expanded to bf16
// get from linear_block / swiglu_block (gemm_kernels.h): the results are bitwise those of the
// expanded weights on the same ISA, and independent of m and the tiling. Two ways, same operations:
//  - up to kFp4RegisterRows activation rows (decode), where the ISA has Fp4Widen<V>::widen: each
//    32-element block of the tile's 4 weight rows is widened in registers (a 16-entry table of the
//    block's scaled values, looked up per nibble) and multiplied at once, in passes of at most
//    kFp4PassRows rows (the later passes read the tile's packed rows from L1);
//  - more rows: for each tile of 4 weight rows and pass of activation rows, the 4 rows become bf16
//    (where the ISA has Fp4Widen<V>::to_bf16) or f32 in a per-thread scratch, and the bf16
//    kernels' dot tiles (dot_rows over BF16 or F32 rows, which widen bf16 to f32 exactly for f32
//    activations) run on it, the widening paid once per pass of up to 24 rows.
// (The only difference a bf16 expansion could show, a bf16 denormal weight where the widening
// gives a zero, is none: VDPBF16PS reads denormals as zero, and the f32 widening keeps them.)
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/aligned_vector.h"
#include "core/dtype.h"
#include "kernels/cpu/gemm_kernels.h"
#include "kernels/ops.h"

namespace deepinfer::cpu {
namespace {  // each ISA's translation unit gets its own copy

// 2^(e - 127) for every UE8M0 byte e (0xff, NaN in the format, gives NaN; binders refuse it).
constexpr std::array<float, 256> make_ue8m0_table() {
  std::array<float, 256> t{};
  for (int e = 0; e < 255; ++e) {
    float v = 1.0f;
    for (int i = e; i > 127; --i) v *= 2.0f;
    for (int i = e; i < 127; ++i) v *= 0.5f;
    t[size_t(e)] = v;
  }
  t[255] = __builtin_nanf("");
  return t;
}
inline constexpr std::array<float, 256> kUe8m0ToF32 = make_ue8m0_table();

constexpr int kFp4Block = 32;  // inputs per scale byte

// For every scale byte e, the 16 values E2M1[n] * 2^(e - 127) (f32, exact; infinite past the f32
// range, NaN for e = 0xff), and their bf16 bits twice each, as words 2n and 2n + 1 (bf16_pairs), so
// that one VPERMPS / VPERMW looks a block's nibbles up from memory with no arithmetic per block:
// VPERMW reads 5 index bits, and a nibble with one stray bit below it finds its value either way.
struct alignas(64) Fp4BlockValues {
  float f32[16];
  uint16_t bf16_pairs[32];
};
inline const std::array<Fp4BlockValues, 256> kFp4BlockValues = [] {
  std::array<Fp4BlockValues, 256> t{};
  for (int e = 0; e < 256; ++e)
    for (int n = 0; n < 16; ++n) {
      const float v = kE2M1ToF32[n] * kUe8m0ToF32[size_t(e)];
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      t[size_t(e)].f32[n] = v;
      t[size_t(e)].bf16_pairs[2 * n] = t[size_t(e)].bf16_pairs[2 * n + 1] = uint16_t(bits >> 16);  // exact: v is bf16
    }
  return t;
}();

// Widening of packed FP4 rows, specialized per ISA. n: elements, a multiple of 32; packed: [n / 2];
// scales: [n / 32].
template <class V>
struct Fp4Widen {
  // out[j] = E2M1(nibble j) * 2^(scales[j / 32] - 127), as f32 (exact).
  static void to_f32(const uint8_t* packed, const uint8_t* scales, int64_t n, float* out) {
    for (int64_t b = 0; b < n / kFp4Block; ++b) {
      const float s = kUe8m0ToF32[scales[b]];
      for (int64_t j = b * kFp4Block; j < (b + 1) * kFp4Block; ++j) out[j] = fp4_e2m1_at(packed, j) * s;
    }
  }
};

// Activation rows up to which the weights are widened in registers (where the ISA can), and the
// rows of one pass (4 x kFp4PassRows accumulators). Passes over the same 4 rows widen them again,
// which costs less than widening them into a scratch and reading it back when the weights come from
// memory (one thread: 5-8 rows 1.4-1.6x, 9-16 rows 1.1-1.4x); in cache the scratch wins at 12-16.
constexpr int64_t kFp4RegisterRows = 16;
constexpr int64_t kFp4PassRows = 4;
// How far ahead of the arithmetic each packed weight stream is prefetched.
constexpr int64_t kFp4PrefetchBytes = 512;

// out[i * 4 + j] = dot(x[i], W_j) for i < MR, j < 4, the 4 weight rows widened block by block in
// registers; per output the sequence of dot_tile (f32 FMA per V::kW elements) or, bf16 activations
// on V::kBf16Dot, of bf16_dot_tile (VDPBF16PS per 32 elements), then V::hsum.
template <class V, int MR, class XE>
void fp4_register_tile(const XE* const* x, const uint8_t* const (&packed)[4], const uint8_t* const (&scales)[4],
                       int64_t n, float* out) {
  using W = Fp4Widen<V>;
  constexpr bool kBf16 = std::is_same_v<XE, uint16_t> && requires { V::kBf16Dot; };
  using Acc = typename V::F;
  Acc acc[MR][4];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[i][j] = V::zero();
  for (int64_t b = 0; b < n / kFp4Block; ++b) {
    if (b % 4 == 0)
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) __builtin_prefetch(packed[j] + b * 16 + kFp4PrefetchBytes);
    if constexpr (kBf16) {
      W::template dot_block_bf16<MR>(x, packed, scales, b, acc);
    } else {
      constexpr int NV = kFp4Block / V::kW;
      typename V::F w[4][NV];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) W::widen(packed[j] + b * 16, scales[j][b], w[j]);
#pragma GCC unroll 4
      for (int h = 0; h < NV; ++h)
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
          const typename V::F xv = V::pin(load_act<V>(x[i] + b * kFp4Block + h * V::kW));
#pragma GCC unroll 4
          for (int j = 0; j < 4; ++j) acc[i][j] = V::fma(xv, w[j][h], acc[i][j]);
        }
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) out[i * 4 + j] = V::hsum(acc[i][j]);
}

// Per-thread scratch of one tile's 4 widened weight rows.
template <class E>
E* fp4_scratch(int64_t n_in) {
  thread_local AlignedVector<E> rows;
  if (rows.size() < size_t(4 * n_in)) rows.resize(size_t(4 * n_in));
  return rows.data();
}

// The FP4 entry check (the drivers' check_weight knows the other dtypes).
inline void check_fp4(const LinearWeight& w) {
  DI_CHECK_MSG(w.scale_e8m0 != nullptr && w.n_in % kFp4Block == 0, "FP4 weights need scale_e8m0 and n_in a multiple of 32");
}

// out[i * 4 + j] = dot(x[i], W[o[j]]) for i < m, j < 4 (see the header: the bf16 kernels' tiles on
// the rows widened exactly).
template <class V, class XE>
void fp4_dot_rows(const XE* const* x, int64_t m, const LinearWeight* const (&w)[4], const int64_t (&o)[4],
                  float* out) {
  const int64_t n = w[0]->n_in;
  const auto packed = [&](int j) { return static_cast<const uint8_t*>(w[j]->data) + o[j] * (n / 2); };
  const auto scales = [&](int j) { return w[j]->scale_e8m0 + o[j] * (n / kFp4Block); };
  if constexpr (requires { &Fp4Widen<V>::widen; }) {
    if (m <= kFp4RegisterRows) {
      const uint8_t* const p[4] = {packed(0), packed(1), packed(2), packed(3)};
      const uint8_t* const s[4] = {scales(0), scales(1), scales(2), scales(3)};
      const int64_t passes = (m + kFp4PassRows - 1) / kFp4PassRows;
      for (int64_t r = 0, left = passes; r < m; --left) {
        const int64_t mr = (m - r + left - 1) / left;  // as even as the passes can be: 5 = 3 + 2
        switch (mr) {
          case 1: fp4_register_tile<V, 1, XE>(x + r, p, s, n, out + r * 4); break;
          case 2: fp4_register_tile<V, 2, XE>(x + r, p, s, n, out + r * 4); break;
          case 3: fp4_register_tile<V, 3, XE>(x + r, p, s, n, out + r * 4); break;
          default: fp4_register_tile<V, 4, XE>(x + r, p, s, n, out + r * 4); break;
        }
        r += mr;
      }
      return;
    }
  }
  if constexpr (requires { &Fp4Widen<V>::to_bf16; }) {  // half the bytes of f32 rows to stream per tile
    uint16_t* s = fp4_scratch<uint16_t>(n);
    WeightRow<uint16_t> rows[4];
    for (int j = 0; j < 4; ++j) {
      Fp4Widen<V>::to_bf16(packed(j), scales(j), n, s + j * n);
      rows[j] = {s + j * n, nullptr};
    }
    dot_rows<V, WeightReader<V, DType::BF16>, XE>(x, m, rows, n, n, out);
  } else {
    float* s = fp4_scratch<float>(n);
    WeightRow<float> rows[4];
    for (int j = 0; j < 4; ++j) {
      Fp4Widen<V>::to_f32(packed(j), scales(j), n, s + j * n);
      rows[j] = {s + j * n, nullptr};
    }
    dot_rows<V, WeightReader<V, DType::F32>, XE>(x, m, rows, n, n, out);
  }
}

// As linear_block_t (gemm_kernels.h): tiles of 4 outputs taken from the block's 4 quarters, passes
// of kRowsPerPass activation rows.
template <class V, class XE>
void fp4_linear_block(const XE* const* x, int64_t m, const LinearWeight& w, int64_t o_begin, int64_t o_end, float* y,
                      int64_t ldy) {
  check_fp4(w);
  const int64_t quarter = (o_end - o_begin + 3) / 4;
  const LinearWeight* const ws[4] = {&w, &w, &w, &w};
  float out[kRowsPerPass * 4];
  for (int64_t r0 = 0; r0 < m; r0 += kRowsPerPass) {
    const int64_t mr = std::min(kRowsPerPass, m - r0);
    for (int64_t t = 0; t < quarter; ++t) {
      int64_t o[4], row[4];
      for (int j = 0; j < 4; ++j) {
        o[j] = o_begin + t + j * quarter;
        row[j] = std::min(o[j], o_end - 1);
      }
      fp4_dot_rows<V, XE>(x + r0, mr, ws, row, out);
      for (int64_t i = 0; i < mr; ++i)
        for (int j = 0; j < 4; ++j)
          if (o[j] < o_end) y[(r0 + i) * ldy + (o[j] - o_begin)] = out[i * 4 + j];
    }
  }
}

// As swiglu_block_t: tile t holds gate and up rows o_begin + t and o_begin + t + half.
template <class V, class XE>
void fp4_swiglu_block(const XE* const* x, int64_t m, const LinearWeight& gate, const LinearWeight& up,
                      int64_t o_begin, int64_t o_end, float* y, int64_t ldy) {
  check_fp4(gate);
  check_fp4(up);
  const int64_t half = (o_end - o_begin + 1) / 2, width = o_end - o_begin;
  const LinearWeight* const ws[4] = {&gate, &gate, &up, &up};
  float out[kRowsPerPass * 4];
  float* ups = swiglu_ups(std::min(m, kRowsPerPass), width);
  for (int64_t r0 = 0; r0 < m; r0 += kRowsPerPass) {
    const int64_t mr = std::min(kRowsPerPass, m - r0);
    for (int64_t t = 0; t < half; ++t) {
      const int64_t o[2] = {o_begin + t, o_begin + t + half};
      const int64_t o1 = std::min(o[1], o_end - 1);
      const int64_t row[4] = {o[0], o1, o[0], o1};
      fp4_dot_rows<V, XE>(x + r0, mr, ws, row, out);
      for (int64_t i = 0; i < mr; ++i)
        for (int j = 0; j < 2; ++j) {
          if (o[j] >= o_end) continue;
          y[(r0 + i) * ldy + (o[j] - o_begin)] = out[i * 4 + j];
          ups[i * width + (o[j] - o_begin)] = out[i * 4 + 2 + j];
        }
    }
    for (int64_t i = 0; i < mr; ++i) silu_mul_n<V>(y + (r0 + i) * ldy, ups + i * width, width, y + (r0 + i) * ldy);
  }
}

// The kernel table's entries: FP4 weights here, every other dtype to gemm_kernels.h.
template <class V>
void linear_block_any(const float* const* x, int64_t m, const LinearWeight& w, int64_t o_begin, int64_t o_end, float* y,
                      int64_t ldy) {
  if (w.dtype == DType::F4_E2M1) return fp4_linear_block<V, float>(x, m, w, o_begin, o_end, y, ldy);
  linear_block<V>(x, m, w, o_begin, o_end, y, ldy);
}

template <class V>
void swiglu_block_any(const float* const* x, int64_t m, const LinearWeight& gate, const LinearWeight& up,
                      int64_t o_begin, int64_t o_end, float* y, int64_t ldy) {
  if (gate.dtype == DType::F4_E2M1) return fp4_swiglu_block<V, float>(x, m, gate, up, o_begin, o_end, y, ldy);
  swiglu_block<V>(x, m, gate, up, o_begin, o_end, y, ldy);
}

template <class V>
void linear_block_bf16x_any(const uint16_t* const* x, int64_t m, const LinearWeight& w, int64_t o_begin,
                            int64_t o_end, float* y, int64_t ldy) {
  if (w.dtype == DType::F4_E2M1) return fp4_linear_block<V, uint16_t>(x, m, w, o_begin, o_end, y, ldy);
  linear_block_bf16x<V>(x, m, w, o_begin, o_end, y, ldy);
}

template <class V>
void swiglu_block_bf16x_any(const uint16_t* const* x, int64_t m, const LinearWeight& gate, const LinearWeight& up,
                            int64_t o_begin, int64_t o_end, float* y, int64_t ldy) {
  if (gate.dtype == DType::F4_E2M1) return fp4_swiglu_block<V, uint16_t>(x, m, gate, up, o_begin, o_end, y, ldy);
  swiglu_block_bf16x<V>(x, m, gate, up, o_begin, o_end, y, ldy);
}

}  // namespace
}  // namespace deepinfer::cpu
