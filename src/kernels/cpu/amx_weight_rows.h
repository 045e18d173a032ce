// The amx level's weight sources: rows of a stored weight as bf16, 32 columns (one tile chunk) at a
// time, for the weight panels of simd_amx.h. Every conversion is exact, so the tiles multiply the
// stored weights' values (fp8: before their block scales):
//  - BF16: copied as stored;
//  - F8_E4M3 and I8_SM: every code but NaN to its bf16 through Avx512Bf16's two byte lookups
//    (fp8x64_to_bf16 with the dtype's tables, subnormals and signed zeros included; e4m3's exponents
//    and 3 mantissa bits lie inside bf16, as do the integers 0-127); the block scales are applied by
//    the tile loop, per block partial sum, or, where the scales fold (LinearWeight::scales_fold),
//    added to the exponents here (times_pow2); tile-major codes a whole 16 x 32 block at a time, in
//    pair order (pair_block);
//  - F4_E2M1: each nibble times its UE8M0 scale (E2M1 * 2^(e - 127) is a bf16 value) through
//    Fp4Widen<Avx512Bf16>::block_bf16, so FP4 weights on tiles are exactly the weights expanded
//    to bf16 on tiles; tile-major nibbles a whole 16 x 32 block at a time (fp4_tile_block), the
//    same values from the same tables (Fp4BlockValues).
// Included by simd_amx.h (kernels_amx.cpp, compiled for AMX with AVX-512 BF16 and VBMI) and, for
// pair_block, by pair_tiles_avx512_bf16.h (kernels_avx512bf16.cpp: no AMX instruction is used here).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/fp4_widen_avx512_bf16.h"
#include "kernels/cpu/simd_avx512_bf16.h"
#include "kernels/ops.h"

namespace deepinfer::cpu::amx {

// Each source writes chunks [c0, c1) of weight row `row` (< n_out) as bf16, chunk c (columns
// [32c, 32c + 32)) at dst + c * stride, zero past n_in. fp8 and FP4 rows are prefetched 2048
// weights ahead (fp8 decode on 10944 x 2048 streamed 7.6-7.8 GB/s with 1024, 8.7-8.8 with 2048,
// 8.0-8.6 with 4096, 5.0-6.4 with none).
constexpr int64_t kPrefetchWeights = 2048;

struct Bf16Source {
  const LinearWeight& w;
  explicit Bf16Source(const LinearWeight& weight) : w(weight) {}
  void chunks(int64_t row, int64_t c0, int64_t c1, uint16_t* dst, int64_t stride) const {
    const uint16_t* p = static_cast<const uint16_t*>(w.data) + row * w.n_in;
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t k = c * 32;
      const __m512i v = k + 32 <= w.n_in ? _mm512_loadu_si512(p + k)
                                         : _mm512_maskz_loadu_epi16(__mmask32((1u << (w.n_in - k)) - 1u), p + k);
      _mm512_store_si512(dst + c * stride, v);
    }
  }
};

// Folded scales: the bf16 words of v (e4m3 codes converted, fp8x64_to_bf16) times 2^k, given k << 7
// in every word of k7 (pow2_words): k added to the exponent field of every word but +-0. Within
// LinearWeight::scales_fold's range every e4m3 value times 2^k is a normal bf16 value, so the
// result is exact (a NaN code, which the tables read as 480, as 480 * 2^k).
inline __m512i times_pow2(__m512i v, __m512i k7) {
  return _mm512_mask_add_epi16(v, _mm512_test_epi16_mask(v, _mm512_set1_epi16(0x7fff)), v, k7);
}
// k << 7 in every word, for the power-of-two scale s = 2^k (a normal float).
inline __m512i pow2_words(float s) {
  uint32_t b;
  std::memcpy(&b, &s, 4);
  return _mm512_set1_epi16(int16_t((int(b >> 23) - 127) * 128));
}
// The folded scales of one row block's chunks c0, c0 + 1, ... in turn (next(): k << 7 of the chunk's
// scale 2^k, as pow2_words), walking the column blocks without a division per chunk.
class ScaleWalk {
 public:
  ScaleWalk() = default;
  ScaleWalk(const LinearWeight& w, int64_t row, int64_t c0)
      : scales_(w.scale_inv + row / w.block_rows * ((w.n_in + w.block_cols - 1) / w.block_cols)),
        per_block_(w.block_cols / 32), blk_(c0 / per_block_), left_(per_block_ - c0 % per_block_) {}
  __m512i next() {
    const __m512i k7 = pow2_words(scales_[blk_]);
    if (--left_ == 0) {
      ++blk_;
      left_ = per_block_;
    }
    return k7;
  }

 private:
  const float* scales_ = nullptr;  // the row block's, one per column block
  int64_t per_block_ = 1;          // chunks per column block
  int64_t blk_ = 0, left_ = 1;     // the next chunk's column block, and its chunks left in it
};

struct Fp8Source {
  const LinearWeight& w;
  const Avx512Bf16::Fp8Lut lut;
  const bool fold;  // the block scales folded into the weights (LinearWeight::scales_fold)
  Fp8Source(const LinearWeight& weight, bool fold_scales) : w(weight), lut(weight.dtype), fold(fold_scales) {}
  // Two chunks per conversion of 64 codes.
  void chunks(int64_t row, int64_t c0, int64_t c1, uint16_t* dst, int64_t stride) const {
    const uint8_t* p = static_cast<const uint8_t*>(w.data) + row * w.n_in;
    ScaleWalk scales;
    if (fold) scales = ScaleWalk(w, row, c0);
    for (int64_t c = c0; c < c1; c += 2) {
      const int64_t k = c * 32;
      const int n = int(std::min<int64_t>(c + 1 < c1 ? 64 : 32, w.n_in - k));
      _mm_prefetch(reinterpret_cast<const char*>(p + k + kPrefetchWeights), _MM_HINT_T0);
      __m512i w0, w1;
      Avx512Bf16::fp8x64_to_bf16(lut, p + k, n, w0, w1);
      if (fold) w0 = times_pow2(w0, scales.next());
      _mm512_store_si512(dst + c * stride, w0);
      if (c + 1 < c1) {
        if (fold) w1 = times_pow2(w1, scales.next());
        _mm512_store_si512(dst + (c + 1) * stride, w1);
      }
    }
  }
};

// Tile-major weights (LinearWeight::tile_major), block (t, c): the 16 x 32 weights of tile t's chunk
// c, prefetching kTileAhead bytes on (the tile's next chunks lie after it). lut: the byte codes'
// tables (Fp8Lut(w.dtype)).
constexpr int64_t kTileAhead = 2048;

// fp8 and int8: the block's 512 codes at data + (t * kc + c) * 512 in pair order (pair p, the columns
// 32c + 2p and 32c + 2p + 1, of row r at byte 32p + 2r), to bf16 in the same order: dst + 32p holds
// pair p of the 16 rows, a tile's B operand (the tile's outputs as its columns). With folded scales
// (fold: the tile's ScaleWalk, at chunk c), times the block's scale (the 16 rows lie in one row
// block where the scales fold).
inline void pair_block(const Avx512Bf16::Fp8Lut& lut, const LinearWeight& w, int64_t kc, int64_t t, int64_t c,
                       uint16_t* dst, ScaleWalk* fold = nullptr) {
  const uint8_t* block = static_cast<const uint8_t*>(w.data) + (t * kc + c) * 512;
  for (int q = 0; q < 512; q += 64) _mm_prefetch(reinterpret_cast<const char*>(block + kTileAhead + q), _MM_HINT_T0);
  const __m512i k7 = fold ? fold->next() : _mm512_setzero_si512();
  for (int p = 0; p < 16; p += 2) {
    __m512i w0, w1;
    Avx512Bf16::fp8x64_to_bf16(lut, block + p * 32, 64, w0, w1);
    if (fold) {
      w0 = times_pow2(w0, k7);
      w1 = times_pow2(w1, k7);
    }
    _mm512_store_si512(dst + p * 32, w0);
    _mm512_store_si512(dst + (p + 1) * 32, w1);
  }
}

// kFp4BlockValues' bf16 values as words n and n + 16 (Fp4BlockHalves::bf16[e]): a nibble with one
// stray bit above it finds its value either way. Only the tile-major FP4 blocks read it.
struct alignas(64) Fp4BlockHalves {
  uint16_t bf16[32];
};
inline const std::array<Fp4BlockHalves, 256> kFp4BlockHalves = [] {
  std::array<Fp4BlockHalves, 256> t{};
  for (int e = 0; e < 256; ++e)
    for (int n = 0; n < 16; ++n) t[size_t(e)].bf16[n] = t[size_t(e)].bf16[n + 16] = kFp4BlockValues[size_t(e)].bf16_pairs[2 * n];
  return t;
}();

// FP4: the block's 256 bytes of nibbles at data + (t * kc + c) * 256 (LinearWeight::tile_major:
// four groups of 4 rows; word l of group g holds column 32c + l of rows 4g .. 4g + 3, a nibble each,
// row 4g + j in bits 4j .. 4j + 3) and the rows' 16 scale bytes at scale_e8m0 + (t * kc + c) * 16,
// to the block's bf16 rows at dst + r * 32, r < 16 (a tile's A operand). Per group one 64-byte load
// and four VPERMWs, word l of row 4g + j indexed by the group's word l shifted right by 0, 3, 8 or
// 11 bits: the row's nibble with one stray bit above it (shifts 0 and 8, looked up in kFp4BlockHalves)
// or below it (3 and 11, bf16_pairs): one VPERMW per 32 weights where each row took VPERMQ,
// VPMULTISHIFTQB and VPERMW (one thread streaming 65536 x 4096: 9.2-9.9 -> 12.4-13.4 GB/s).
inline void fp4_tile_block(const LinearWeight& w, int64_t kc, int64_t t, int64_t c, uint16_t* dst) {
  const int64_t b = t * kc + c;
  const uint8_t* nibbles = static_cast<const uint8_t*>(w.data) + b * 256;
  const uint8_t* scales = w.scale_e8m0 + b * 16;
  for (int q = 0; q < 256; q += 64) _mm_prefetch(reinterpret_cast<const char*>(nibbles + kTileAhead + q), _MM_HINT_T0);
  if (c % 4 == 0) _mm_prefetch(reinterpret_cast<const char*>(scales + kTileAhead / 16), _MM_HINT_T0);
  for (int g = 0; g < 4; ++g) {
    const __m512i v = _mm512_loadu_si512(nibbles + 64 * g);
    const uint8_t* e = scales + 4 * g;
    uint16_t* d = dst + 4 * g * 32;
    _mm512_store_si512(d, _mm512_permutexvar_epi16(v, _mm512_load_si512(kFp4BlockHalves[e[0]].bf16)));
    _mm512_store_si512(d + 32, _mm512_permutexvar_epi16(_mm512_srli_epi16(v, 3), _mm512_load_si512(kFp4BlockValues[e[1]].bf16_pairs)));
    _mm512_store_si512(d + 64, _mm512_permutexvar_epi16(_mm512_srli_epi16(v, 8), _mm512_load_si512(kFp4BlockHalves[e[2]].bf16)));
    _mm512_store_si512(d + 96, _mm512_permutexvar_epi16(_mm512_srli_epi16(v, 11), _mm512_load_si512(kFp4BlockValues[e[3]].bf16_pairs)));
  }
}

struct Fp4Source {  // n_in a multiple of 32: one scale byte per chunk
  const LinearWeight& w;
  explicit Fp4Source(const LinearWeight& weight) : w(weight) {}
  void chunks(int64_t row, int64_t c0, int64_t c1, uint16_t* dst, int64_t stride) const {
    const uint8_t* p = static_cast<const uint8_t*>(w.data) + row * (w.n_in / 2);
    const uint8_t* s = w.scale_e8m0 + row * (w.n_in / 32);
    for (int64_t c = c0; c < c1; ++c) {
      if (c % 4 == 0) _mm_prefetch(reinterpret_cast<const char*>(p + c * 16 + kPrefetchWeights / 2), _MM_HINT_T0);
      _mm512_store_si512(dst + c * stride, Fp4Widen<Avx512Bf16>::block_bf16(p + c * 16, s[c]));
    }
  }
};

}  // namespace deepinfer::cpu::amx
