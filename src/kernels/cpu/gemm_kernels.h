// Weight-streaming GEMM kernels, written once over a SIMD traits type V (simd_*.h) and
// instantiated per ISA by kernels_<isa>.cpp. Weights stay in their stored dtype and are
// widened to f32 in registers; nothing is materialized.
//
// Activation rows XE are f32, or bf16 (rounded by the driver; LinearWeight::act_dtype) against
// bf16 or fp8 weights: a V with native bf16 dot products multiplies those directly
// (V::bf16_dot_tile; fp8 and int8 codes through V::fp8_dot_rows, which converts them to bf16
// exactly and scales per block partial sum), any other V widens both to f32 as for f32 activations.
//
// Dot layout (linear, swiglu): a tile of MR activation rows x 4 weight rows keeps one f32
// vector accumulator per (row, output), runs over n_in in vector steps (fp8: per scale block),
// and ends with one horizontal sum. Every output's arithmetic depends only on its own row and
// weight row, never on the tile it sits in, the batch size or the thread.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/aligned_vector.h"
#include "core/check.h"
#include "core/dtype.h"
#include "kernels/cpu/row_tiles.h"
#include "kernels/cpu/vexp.h"
#include "kernels/ops.h"

namespace deepinfer::cpu {
namespace {  // each ISA's translation unit gets its own copy

// How one weight dtype is read into V::F vectors. kScaled: fp8 with per-block scale_inv.
template <class V, DType T>
struct WeightReader;

template <class V>
struct WeightReader<V, DType::F32> {
  using E = float;
  static constexpr bool kScaled = false;
  static typename V::F load(const E* p) { return V::load(p); }
  static typename V::F load_n(const E* p, int n) { return V::load_n(p, n); }
};
template <class V>
struct WeightReader<V, DType::BF16> {
  using E = uint16_t;
  static constexpr bool kScaled = false;
  static typename V::F load(const E* p) { return V::from_bf16(p); }
  static typename V::F load_n(const E* p, int n) { return V::from_bf16_n(p, n); }
};
template <class V>
struct WeightReader<V, DType::F16> {
  using E = uint16_t;
  static constexpr bool kScaled = false;
  static typename V::F load(const E* p) { return V::from_f16(p); }
  static typename V::F load_n(const E* p, int n) { return V::from_f16_n(p, n); }
};
// Byte codes with block scales (fp8, int8): vectors come out as value * 2^-8 (fp8) or value (int8);
// callers multiply by scale_inv * kScaleFactor, which gives exactly the rounded product
// value * scale_inv.
template <class V, DType T>
  requires(has_block_scales(T))
struct WeightReader<V, T> {
  using E = uint8_t;
  static constexpr bool kScaled = true;
  static constexpr bool kFp8 = T == DType::F8_E4M3;
  static constexpr DType kCodes = T;
  static constexpr float kScaleFactor = kFp8 ? 256.0f : 1.0f;
  static typename V::F load(const E* p) {
    if constexpr (kFp8) return V::from_fp8(p);
    else return V::from_i8sm(p);
  }
  static typename V::F load_n(const E* p, int n) {
    if constexpr (kFp8) return V::from_fp8_n(p, n);
    else return V::from_i8sm_n(p, n);
  }
};

// Activation vectors: f32, or bf16 widened exactly.
template <class V>
typename V::F load_act(const float* p) { return V::load(p); }
template <class V>
typename V::F load_act(const uint16_t* p) { return V::from_bf16(p); }
template <class V>
typename V::F load_act_n(const float* p, int n) { return V::load_n(p, n); }
template <class V>
typename V::F load_act_n(const uint16_t* p, int n) { return V::from_bf16_n(p, n); }

// A bf16 activation row split by V::split_row (levels with V::kSplitRows); read only by V's tiles.
struct SplitRow {
  float v;
};

// The rows a pass of mr activation rows x runs on against T weights: x itself, or for bf16 and fp8
// weights on a level that splits rows, x split once into a per-thread scratch (the blocks of calls
// that do not pack: the drivers pack, and so split once per call, where every weight allows it).
template <class V, DType T, class XE>
auto pass_rows(const XE* const* x, int64_t mr, int64_t k_len) {
  if constexpr (std::is_same_v<XE, uint16_t> && (T == DType::BF16 || has_block_scales(T)) && requires { V::kSplitRows; }) {
    if constexpr (V::kSplitRows) {
      thread_local AlignedVector<float> rows;
      thread_local std::vector<const SplitRow*> ptrs;
      const int64_t ld = V::split_row_floats(k_len);
      rows.resize(size_t(mr * ld));
      ptrs.resize(size_t(mr));
      for (int64_t i = 0; i < mr; ++i) {
        V::split_row(x[i], k_len, rows.data() + i * ld);
        ptrs[size_t(i)] = reinterpret_cast<const SplitRow*>(rows.data() + i * ld);
      }
      return static_cast<const SplitRow* const*>(ptrs.data());
    } else {
      return x;
    }
  } else {
    return x;
  }
}

// One row of a weight: its elements and (fp8) its row of block scales.
template <class E>
struct WeightRow {
  const E* data = nullptr;
  const float* scales = nullptr;  // [ceil(n_in / block_cols)], fp8 only
};

template <class E>
WeightRow<E> weight_row(const LinearWeight& w, int64_t row) {
  WeightRow<E> r{static_cast<const E*>(w.data) + row * w.n_in, nullptr};
  if (w.scale_inv) r.scales = w.scale_inv + (row / w.block_rows) * ((w.n_in + w.block_cols - 1) / w.block_cols);
  return r;
}

// How far ahead of the arithmetic each fp8 weight stream is prefetched: widening fp8 leaves too
// few loads in flight for the hardware prefetcher alone (bench/RESULTS.md, second round).
constexpr int64_t kFp8PrefetchBytes = 1024;

// out[i * 4 + j] = dot(x[i][0, k_len), w[j]) for i < MR, j < 4. seg: fp8 scale block length
// (a multiple of V::kW), else k_len.
template <class V, class R, int MR, class XE>
inline void dot_tile(const XE* const* x, const WeightRow<typename R::E>* w, int64_t k_len, int64_t seg,
                     float* out) {
  if constexpr (std::is_same_v<XE, SplitRow>) {
    return V::template bf16_dot_tile<MR>(reinterpret_cast<const float* const*>(x), w, k_len, out);
  } else if constexpr (std::is_same_v<XE, uint16_t> && !R::kScaled && requires { V::kBf16Dot; }) {
    return V::template bf16_dot_tile<MR>(x, w, k_len, out);
  } else {
    using F = typename V::F;
    constexpr int NR = 4;
    F acc[MR][NR];
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) acc[i][j] = V::zero();
    for (int64_t k0 = 0; k0 < k_len; k0 += seg) {
      const int64_t k1 = std::min(k_len, k0 + seg);
      F s[NR];
      if constexpr (R::kScaled) {
#pragma GCC unroll 4
        for (int j = 0; j < NR; ++j) s[j] = V::bcast(w[j].scales[k0 / seg] * R::kScaleFactor);
      }
      int64_t k = k0;
      for (; k + V::kW <= k1; k += V::kW) {
        if constexpr (R::kScaled)
          if (k % 64 == 0)
#pragma GCC unroll 4
            for (int j = 0; j < NR; ++j) __builtin_prefetch(w[j].data + k + kFp8PrefetchBytes);
        F wv[NR];
#pragma GCC unroll 4
        for (int j = 0; j < NR; ++j) {
          wv[j] = R::load(w[j].data + k);
          if constexpr (R::kScaled) wv[j] = V::mul(wv[j], s[j]);
        }
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
          const F xv = V::pin(load_act<V>(x[i] + k));
#pragma GCC unroll 4
          for (int j = 0; j < NR; ++j) acc[i][j] = V::fma(xv, wv[j], acc[i][j]);
        }
      }
      if (k < k1) {
        const int n = int(k1 - k);
        F wv[NR];
#pragma GCC unroll 4
        for (int j = 0; j < NR; ++j) {
          wv[j] = R::load_n(w[j].data + k, n);
          if constexpr (R::kScaled) wv[j] = V::mul(wv[j], s[j]);
        }
#pragma GCC unroll 16
        for (int i = 0; i < MR; ++i) {
          const F xv = load_act_n<V>(x[i] + k, n);
#pragma GCC unroll 4
          for (int j = 0; j < NR; ++j) acc[i][j] = V::fma(xv, wv[j], acc[i][j]);
        }
      }
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) out[i * NR + j] = V::hsum(acc[i][j]);
  }
}

// Runs dot_tile over rows [0, m) in row tiles (row_tiles.h) for the 4 weight rows `w`.
template <class V, class R, class XE>
inline void dot_rows(const XE* const* x, int64_t m, const WeightRow<typename R::E>* w, int64_t k_len,
                     int64_t seg, float* out /* [m, 4] */) {
  if constexpr (std::is_same_v<XE, uint16_t> && R::kScaled && requires { V::kBf16Dot; }) {
    return V::fp8_dot_rows(x, m, w, k_len, seg, R::kCodes, out);  // bf16 dot products on exact bf16 weights
  } else if constexpr (std::is_same_v<XE, SplitRow> && R::kScaled) {
    return V::fp8_dot_rows(reinterpret_cast<const float* const*>(x), m, w, k_len, seg, R::kCodes, out);
  } else {
    for_row_tiles(m, [&]<int MR>(int64_t r) __attribute__((always_inline)) { dot_tile<V, R, MR, XE>(x + r, w, k_len, seg, out + r * 4); });
  }
}

// Activation rows per pass: a pass's rows stay in L1/L2 while the block's weight rows stream.
constexpr int64_t kRowsPerPass = 24;

template <class V, DType T, class XE>
void linear_block_t(const XE* const* x, int64_t m, const LinearWeight& w, int64_t o_begin, int64_t o_end,
                    float* y, int64_t ldy) {
  using R = WeightReader<V, T>;
  const int64_t seg = R::kScaled ? w.block_cols : w.n_in;
  // Tile t takes rows o_begin + t + j * quarter (j < 4): each of the 4 weight streams walks a
  // contiguous quarter of the block, which hardware prefetchers follow across rows.
  const int64_t quarter = (o_end - o_begin + 3) / 4;
  float out[kRowsPerPass * 4];
  for (int64_t r0 = 0; r0 < m; r0 += kRowsPerPass) {
    const int64_t mr = std::min(kRowsPerPass, m - r0);
    const auto xr = pass_rows<V, T>(x + r0, mr, w.n_in);
    for (int64_t t = 0; t < quarter; ++t) {
      int64_t o[4];
      WeightRow<typename R::E> rows[4];
      for (int j = 0; j < 4; ++j) {
        o[j] = o_begin + t + j * quarter;
        rows[j] = weight_row<typename R::E>(w, std::min(o[j], o_end - 1));
      }
      dot_rows<V, R>(xr, mr, rows, w.n_in, seg, out);
      for (int64_t i = 0; i < mr; ++i)
        for (int j = 0; j < 4; ++j)
          if (o[j] < o_end) y[(r0 + i) * ldy + (o[j] - o_begin)] = out[i * 4 + j];
    }
  }
}

// The up projections of a pass of swiglu rows, [rows, o_end - o_begin], until the pass's gates
// are all in y (a per-thread buffer).
inline float* swiglu_ups(int64_t rows, int64_t width) {
  thread_local AlignedVector<float> ups;
  if (ups.size() < size_t(rows * width)) ups.resize(size_t(rows * width));
  return ups.data();
}

template <class V, DType T, class XE>
void swiglu_block_t(const XE* const* x, int64_t m, const LinearWeight& gate, const LinearWeight& up,
                    int64_t o_begin, int64_t o_end, float* y, int64_t ldy) {
  using R = WeightReader<V, T>;
  const int64_t seg = R::kScaled ? gate.block_cols : gate.n_in;
  // Tile t takes outputs o_begin + t and o_begin + t + half: two long streams in each matrix.
  const int64_t half = (o_end - o_begin + 1) / 2, width = o_end - o_begin;
  float out[kRowsPerPass * 4];
  float* ups = swiglu_ups(std::min(m, kRowsPerPass), width);
  for (int64_t r0 = 0; r0 < m; r0 += kRowsPerPass) {
    const int64_t mr = std::min(kRowsPerPass, m - r0);
    const auto xr = pass_rows<V, T>(x + r0, mr, gate.n_in);
    for (int64_t t = 0; t < half; ++t) {
      const int64_t o[2] = {o_begin + t, o_begin + t + half};
      const int64_t o1 = std::min(o[1], o_end - 1);
      const WeightRow<typename R::E> rows[4] = {weight_row<typename R::E>(gate, o[0]), weight_row<typename R::E>(gate, o1),
                                                weight_row<typename R::E>(up, o[0]), weight_row<typename R::E>(up, o1)};
      dot_rows<V, R>(xr, mr, rows, gate.n_in, seg, out);
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

// Outer layout: acc[i][j] (MR rows x NC vectors of columns) += x[i][d] * W[row0 + d][c...],
// d ascending. `n_valid` limits the last columns (a tail tile).
template <class V, class R, int MR>
inline void outer_tile(const float* const* x, int64_t n_d, const LinearWeight& w, int64_t row0, int64_t c0,
                       int n_valid, float* y, int64_t ldy) {
  using F = typename V::F;
  constexpr int NC = 4;
  const bool full = n_valid >= NC * V::kW;
  F acc[MR][NC];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NC; ++j) acc[i][j] = V::zero();
  for (int64_t d = 0; d < n_d; ++d) {
    const WeightRow<typename R::E> row = weight_row<typename R::E>(w, row0 + d);
    F wv[NC];
#pragma GCC unroll 4
    for (int j = 0; j < NC; ++j) {
      const int64_t c = c0 + j * V::kW;
      const int n = std::clamp(n_valid - j * V::kW, 0, V::kW);
      wv[j] = full ? R::load(row.data + c) : R::load_n(row.data + c, n);
      if constexpr (R::kScaled) wv[j] = V::mul(wv[j], V::bcast(row.scales[c / w.block_cols] * R::kScaleFactor));
      wv[j] = V::pin(wv[j]);
    }
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const F xb = V::bcast(x[i][d]);
#pragma GCC unroll 4
      for (int j = 0; j < NC; ++j) acc[i][j] = V::fma(xb, wv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NC; ++j) {
      const int n = std::clamp(n_valid - j * V::kW, 0, V::kW);
      if (n == V::kW) V::store(y + i * ldy + j * V::kW, acc[i][j]);
      else if (n > 0) V::store_n(y + i * ldy + j * V::kW, acc[i][j], n);
    }
}

template <class V, DType T>
void outer_block_t(const float* const* x, int64_t m, int64_t n_d, const LinearWeight& w, int64_t row0,
                   int64_t c_begin, int64_t c_end, float* y, int64_t ldy) {
  using R = WeightReader<V, T>;
  constexpr int64_t kCols = 4 * V::kW;
  for (int64_t c = c_begin; c < c_end; c += kCols) {
    const int n_valid = int(std::min(kCols, c_end - c));
    int64_t r = 0;
    float* yc = y + (c - c_begin);
    for (; r + 4 <= m; r += 4) outer_tile<V, R, 4>(x + r, n_d, w, row0, c, n_valid, yc + r * ldy, ldy);
    switch (m - r) {
      case 3: outer_tile<V, R, 3>(x + r, n_d, w, row0, c, n_valid, yc + r * ldy, ldy); break;
      case 2: outer_tile<V, R, 2>(x + r, n_d, w, row0, c, n_valid, yc + r * ldy, ldy); break;
      case 1: outer_tile<V, R, 1>(x + r, n_d, w, row0, c, n_valid, yc + r * ldy, ldy); break;
      default: break;
    }
  }
}

// Entry points dispatching on the weight dtype.
template <class V>
void linear_block(const float* const* x, int64_t m, const LinearWeight& w, int64_t o_begin, int64_t o_end, float* y,
                  int64_t ldy) {
  switch (w.dtype) {
    case DType::F32: return linear_block_t<V, DType::F32, float>(x, m, w, o_begin, o_end, y, ldy);
    case DType::BF16: return linear_block_t<V, DType::BF16, float>(x, m, w, o_begin, o_end, y, ldy);
    case DType::F16: return linear_block_t<V, DType::F16, float>(x, m, w, o_begin, o_end, y, ldy);
    case DType::F8_E4M3: return linear_block_t<V, DType::F8_E4M3, float>(x, m, w, o_begin, o_end, y, ldy);
    case DType::I8_SM: return linear_block_t<V, DType::I8_SM, float>(x, m, w, o_begin, o_end, y, ldy);
    default: DI_CHECK_MSG(false, "storage-only dtype in a GEMM (weight binders admit F32, F16, BF16, F8_E4M3; I8_SM from requantization)");
  }
}

template <class V>
void swiglu_block(const float* const* x, int64_t m, const LinearWeight& gate, const LinearWeight& up,
                  int64_t o_begin, int64_t o_end, float* y, int64_t ldy) {
  switch (gate.dtype) {
    case DType::F32: return swiglu_block_t<V, DType::F32, float>(x, m, gate, up, o_begin, o_end, y, ldy);
    case DType::BF16: return swiglu_block_t<V, DType::BF16, float>(x, m, gate, up, o_begin, o_end, y, ldy);
    case DType::F16: return swiglu_block_t<V, DType::F16, float>(x, m, gate, up, o_begin, o_end, y, ldy);
    case DType::F8_E4M3: return swiglu_block_t<V, DType::F8_E4M3, float>(x, m, gate, up, o_begin, o_end, y, ldy);
    case DType::I8_SM: return swiglu_block_t<V, DType::I8_SM, float>(x, m, gate, up, o_begin, o_end, y, ldy);
    default: DI_CHECK_MSG(false, "storage-only dtype in a GEMM (weight binders admit F32, F16, BF16, F8_E4M3; I8_SM from requantization)");
  }
}

// bf16 activations against bf16, fp8 or int8 weights (the drivers check the weight dtype).
template <class V>
void linear_block_bf16x(const uint16_t* const* x, int64_t m, const LinearWeight& w, int64_t o_begin, int64_t o_end,
                        float* y, int64_t ldy) {
  if (w.dtype == DType::F8_E4M3) return linear_block_t<V, DType::F8_E4M3, uint16_t>(x, m, w, o_begin, o_end, y, ldy);
  if (w.dtype == DType::I8_SM) return linear_block_t<V, DType::I8_SM, uint16_t>(x, m, w, o_begin, o_end, y, ldy);
  linear_block_t<V, DType::BF16, uint16_t>(x, m, w, o_begin, o_end, y, ldy);
}

template <class V>
void swiglu_block_bf16x(const uint16_t* const* x, int64_t m, const LinearWeight& gate, const LinearWeight& up,
                        int64_t o_begin, int64_t o_end, float* y, int64_t ldy) {
  if (gate.dtype == DType::F8_E4M3)
    return swiglu_block_t<V, DType::F8_E4M3, uint16_t>(x, m, gate, up, o_begin, o_end, y, ldy);
  if (gate.dtype == DType::I8_SM) return swiglu_block_t<V, DType::I8_SM, uint16_t>(x, m, gate, up, o_begin, o_end, y, ldy);
  swiglu_block_t<V, DType::BF16, uint16_t>(x, m, gate, up, o_begin, o_end, y, ldy);
}

// y[i] = x[i] rounded to bf16 (nearest even), i < n.
template <class V>
void round_to_bf16(const float* x, uint16_t* y, int64_t n) {
  if constexpr (requires { V::kBf16Dot; }) return V::round_to_bf16(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_bf16(x[i]);
}

// Split packing (levels with V::kSplitRows; kernel_table.h's packed blocks): a call's activation
// rows rounded to bf16 and split by V::split_row once, row r at r * split_packed_elems<V>(1, n_in)
// uint16_t elements (its floats stored through intrinsics), instead of once per block and pass.
// The blocks run on bf16, fp8 and int8 weights; FP4 rows run unsplit (packs_split).
inline bool packs_split(const LinearWeight& w) {
  return w.dtype == DType::BF16 || has_block_scales(w.dtype);
}
template <class V>
int64_t split_packed_elems(int64_t m, int64_t n_in) {
  return m * 2 * V::split_row_floats(n_in);
}
template <class V>
void pack_split_rows(const float* const* x, int64_t m, int64_t n_in, uint16_t* packed) {
  thread_local AlignedVector<uint16_t> row;
  row.resize(size_t(n_in));
  for (int64_t r = 0; r < m; ++r) {
    round_to_bf16<V>(x[r], row.data(), n_in);
    V::split_row(row.data(), n_in, reinterpret_cast<float*>(packed + r * split_packed_elems<V>(1, n_in)));
  }
}
// The packed rows' pointers, per thread.
template <class V>
const SplitRow* const* split_packed_rows(const uint16_t* packed, int64_t m, int64_t n_in) {
  thread_local std::vector<const SplitRow*> rows;
  rows.resize(size_t(m));
  for (int64_t r = 0; r < m; ++r)
    rows[size_t(r)] = reinterpret_cast<const SplitRow*>(packed + r * split_packed_elems<V>(1, n_in));
  return rows.data();
}
template <class V>
void linear_block_split_packed(const uint16_t* packed, int64_t m, const LinearWeight& w, int64_t o_begin,
                               int64_t o_end, float* y, int64_t ldy) {
  const SplitRow* const* x = split_packed_rows<V>(packed, m, w.n_in);
  if (w.dtype == DType::F8_E4M3) return linear_block_t<V, DType::F8_E4M3, SplitRow>(x, m, w, o_begin, o_end, y, ldy);
  if (w.dtype == DType::I8_SM) return linear_block_t<V, DType::I8_SM, SplitRow>(x, m, w, o_begin, o_end, y, ldy);
  linear_block_t<V, DType::BF16, SplitRow>(x, m, w, o_begin, o_end, y, ldy);
}
template <class V>
void swiglu_block_split_packed(const uint16_t* packed, int64_t m, const LinearWeight& gate, const LinearWeight& up,
                               int64_t o_begin, int64_t o_end, float* y, int64_t ldy) {
  const SplitRow* const* x = split_packed_rows<V>(packed, m, gate.n_in);
  if (gate.dtype == DType::F8_E4M3)
    return swiglu_block_t<V, DType::F8_E4M3, SplitRow>(x, m, gate, up, o_begin, o_end, y, ldy);
  if (gate.dtype == DType::I8_SM) return swiglu_block_t<V, DType::I8_SM, SplitRow>(x, m, gate, up, o_begin, o_end, y, ldy);
  swiglu_block_t<V, DType::BF16, SplitRow>(x, m, gate, up, o_begin, o_end, y, ldy);
}

template <class V>
void outer_block(const float* const* x, int64_t m, int64_t n_d, const LinearWeight& w, int64_t row0, int64_t c_begin,
                 int64_t c_end, float* y, int64_t ldy) {
  switch (w.dtype) {
    case DType::F32: return outer_block_t<V, DType::F32>(x, m, n_d, w, row0, c_begin, c_end, y, ldy);
    case DType::BF16: return outer_block_t<V, DType::BF16>(x, m, n_d, w, row0, c_begin, c_end, y, ldy);
    case DType::F16: return outer_block_t<V, DType::F16>(x, m, n_d, w, row0, c_begin, c_end, y, ldy);
    case DType::F8_E4M3: return outer_block_t<V, DType::F8_E4M3>(x, m, n_d, w, row0, c_begin, c_end, y, ldy);
    case DType::I8_SM: return outer_block_t<V, DType::I8_SM>(x, m, n_d, w, row0, c_begin, c_end, y, ldy);
    default: DI_CHECK_MSG(false, "storage-only dtype in a GEMM (weight binders admit F32, F16, BF16, F8_E4M3; I8_SM from requantization)");
  }
}

}  // namespace
}  // namespace deepinfer::cpu
