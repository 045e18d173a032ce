// AMX (TMUL, bf16): bf16, fp8 (e4m3, block scales), int8 (I8_SM, block scales) and FP4 (e2m1,
// UE8M0 per 32) weights against bf16 activations on tiles, for every batch size. Included only by
// kernels_amx.cpp, compiled for it and run only where the CPU has AMX and the OS granted the tile
// state (isa.cpp).
//
// Operands. Weights are the A operand: a tile is 16 weight rows x 32 columns, copied per call from
// the stored [n_out, n_in] rows into contiguous bf16 panels (copy_panels), exactly
// (amx_weight_rows.h: fp8 and int8 codes to their bf16, FP4 nibbles times their scale).
// Activations are the B operand, packed once per call by pack_bf16x into token tiles (layout in kernel_table.h): for
// token tile t and k chunk c, row p of the 1 KiB block holds pair p (elements 32c + 2p,
// 32c + 2p + 1) of each of the tile's 16 tokens. C = A x B is then [16 outputs, 16 tokens] in
// f32, transposed into y by the epilogue. Past n_in, m and the block's outputs both operands are
// zero; the matrix is never read beyond its end. bf16 weights relaid tile-major need no panels: each
// 16 x 32 block is 1 KiB of the A operand, read where it lies at every m (reads_in_place). One
// exception to the roles: decode (one token tile) against fp8 or int8 weights relaid tile-major
// streams them as the B operand (stream_pairs: the relay stores their codes in pair order, the B
// layout, so a block converts without a transpose) against the tokens' rows as A, and C is
// [tokens, 16 outputs].
//
// Bits. TDPBF16PS computes what the Intel SDM's pseudo-code for it says (every output of the
// kernels tested bitwise against it: amx_tile_arithmetic_test.cpp): per chunk, the 16 even and the
// 16 odd products are accumulated separately, each by f32 FMAs from zero in ascending k, and their
// sum is added to the accumulator (round to nearest even, subnormal inputs and outputs flushed);
// not VDPBF16PS's order. An output thus depends only on its own A row and B column. Every output
// is one accumulator zeroed and then fed chunks 0, 1, ... in order, so its bits depend only on
// its weight row and its activation row: never on m, the tile it lands in, the block, the pass or
// the thread; and any kernel that takes the same steps (on FMA units, say) gives the same bits.
//
// fp8 and int8 (I8_SM) weights (block_cols a multiple of 32, so that a chunk lies in one column
// block; block_rows a multiple of 16, so that a tile's 16 rows share one scale row, or 1, a scale
// row per output): each output's chunks of one scale block are
// accumulated from zero on the tiles, the partial stored, and total = fma(partial, scale, total)
// (f32, lane-wise, total from zero) in block order: the arithmetic shape of fp8_dot_rows. Against
// the dequantized weights (code * scale, in double) with the bf16-rounded activations, the products
// are exact and only roundings remain: TDPBF16PS's f32 additions within each scale block (each
// product added with at most one rounding, in whatever order), one rounding of each block's scaled
// partial and one of its addition into the total, so to first order
// |error| <= (n_in + 2 * n_blocks) * 2^-24 * sum_i |x_i * w_i * scale_i|. FP4 weights
// carry their scale in the panel values and take the bf16 path, bitwise the weights expanded to
// bf16.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/aligned_vector.h"
#include "kernels/cpu/amx_weight_rows.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/vexp.h"
#include "kernels/ops.h"

namespace deepinfer::cpu::amx {

constexpr int kTile = 16;                    // outputs per weight tile, tokens per token tile
constexpr int64_t kChunk = kAmxChunk;        // k per TDPBF16PS
constexpr int64_t kBlockElems = kAmxBlockElems;  // bf16 elements of one packed 16 x 32 block

// Weights as the A operand: every tile 16 rows; weight tiles (tmm4-5) are 64 bytes wide,
// accumulators (tmm0-3) and activation tiles (tmm6-7) 4 * tokens bytes: all 16 token columns, or in
// a stream with fewer tokens (stream_fp4) only theirs, which each output's bits do not depend on.
// pairs(n): weights as the B operand (stream_pairs): every tile 64 bytes wide, weight tiles 16 rows
// (pairs), accumulators and activation tiles n rows (tokens).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
  explicit TileConfig(int tokens) {
    for (int i = 0; i < 8; ++i) {
      colsb[i] = uint16_t(i == 4 || i == 5 ? 64 : 4 * tokens);
      rows[i] = 16;
    }
  }
  static TileConfig pairs(int n) {
    TileConfig cfg(kTile);
    for (int i = 0; i < 8; ++i) cfg.rows[i] = uint8_t(i == 4 || i == 5 ? 16 : n);
    return cfg;
  }
};

// Configures the calling thread's tiles for a block and releases them at its end.
struct TileScope {
  explicit TileScope(const TileConfig& cfg = TileConfig(kTile)) { _tile_loadconfig(&cfg); }
  ~TileScope() { _tile_release(); }
  TileScope(const TileScope&) = delete;
  TileScope& operator=(const TileScope&) = delete;
};

// Rounds rows x[j][0, n_in), j < m <= 16, to bf16 (nearest even, as VCVTNEPS2BF16) into one
// token tile: kc blocks of kBlockElems, zero past m and n_in.
inline void pack_token_tile(const float* const* x, int64_t m, int64_t n_in, uint16_t* tile) {
  const int64_t kc = (n_in + kChunk - 1) / kChunk;
  for (int64_t c = 0; c < kc; ++c) {
    const int64_t k0 = c * kChunk, n = std::min<int64_t>(kChunk, n_in - k0);
    const __mmask16 lo = __mmask16(n >= 16 ? 0xffff : (1u << n) - 1u);
    const __mmask16 hi = __mmask16(n >= 32 ? 0xffff : n <= 16 ? 0 : (1u << (n - 16)) - 1u);
    const auto row = [&](int j) {
      if (j >= m) return _mm512_setzero_si512();
      const __m256bh a = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(lo, x[j] + k0));
      const __m256bh b = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(hi, x[j] + k0 + 16));
      return _mm512_inserti64x4(_mm512_castsi256_si512(__m256i(a)), __m256i(b), 1);
    };
    transpose16_by(row, [&](int p, __m512i v) { _mm512_storeu_si512(tile + c * kBlockElems + p * 32, v); });
  }
}

// packs (kernel_table.h): bf16 weights, fp8 and int8 weights whose column blocks hold whole chunks
// and whose row blocks whole tiles or single rows, FP4 weights with a scale per chunk (else
// fp4_kernels.h's checks).
inline bool packs(const LinearWeight& w) {
  switch (w.dtype) {
    case DType::BF16: return true;
    case DType::F8_E4M3:
    case DType::I8_SM: return w.block_cols % 32 == 0 && (w.block_rows % 16 == 0 || w.block_rows == 1);
    case DType::F4_E2M1: return w.scale_e8m0 != nullptr && w.n_in % 32 == 0;
    default: return false;
  }
}

// pack_bf16x: rows [0, m) into ceil(m / 16) token tiles.
inline void pack_bf16x(const float* const* x, int64_t m, int64_t n_in, uint16_t* packed) {
  const int64_t tile_elems = (n_in + kChunk - 1) / kChunk * kBlockElems;
  for (int64_t t = 0; t * kTile < m; ++t)
    pack_token_tile(x + t * kTile, std::min<int64_t>(kTile, m - t * kTile), n_in, packed + t * tile_elems);
}

// Chunks per K block: two weight tiles' K block (2 x 8 KiB) stays in L1 while every token tile
// of the pass runs over it; the accumulators go to memory between K blocks (exactly: an f32
// store and load).
constexpr int64_t kKBlock = 8;
// A block's weight panels (KernelTable::packed_panel_bytes, where a call's activations outgrow one
// pass) and the token tiles of a pass (their packed activations about kPassBytes) share the L2 of
// every AMX core, 2 MiB: such activations stream past the panels once per block, so the larger the
// block the fewer times they do. With 256 KiB of panels and 1 MiB passes, a V4.1 twin's K = 5120
// linears ran 32 outputs to a block and streamed the prompt's activations from L3 for every 32;
// these sizes took its prefill of 2048 tokens from 75.6-76.0 to 84.9-85.9 tok/s (bench/RESULTS.md).
// Smaller calls keep smaller blocks, more of them for the balance (with 1 MiB for every call,
// decode at batch 32-64 took 3-7 % longer).
constexpr int64_t kPanelBytes = int64_t(1) << 20;
constexpr int64_t kPassBytes = int64_t(512) << 10;
constexpr int64_t kMaxPassTiles = 16;
// With one token tile, panels of up to 4 tiles this large are copied ahead (copies_ahead).
constexpr int64_t kAheadBytes = int64_t(1) << 20;

// A block's weight tiles, copied once per call: tile i holds outputs [o_begin + 16i, +16), chunk c
// of it at panels[(i * kc + c) * kPanelStride] as [16 rows, 32 columns], zero past n_in and for
// rows at or past o_end. (Tile loads from the weights themselves would read 16 rows n_in * 2
// bytes apart, which for n_in a multiple of 2048 all fall into one L1 set.) The copy reads the
// block's rows front to back, as a memory stream; a spare line after each 1 KiB chunk spreads a
// row's stores over the L1 sets.
constexpr int64_t kPanelStride = kBlockElems + 32;
template <class Source>
inline void copy_panels_from(const Source& src, int64_t n_in, int64_t o_begin, int64_t o_end, uint16_t* panels,
                             int64_t c0, int64_t c1, int64_t r0, int64_t r1) {
  const int64_t kc = (n_in + kChunk - 1) / kChunk;
  for (int64_t r = r0; r < r1; ++r) {
    uint16_t* dst = panels + (r / kTile * kc) * kPanelStride + r % kTile * kChunk;
    if (o_begin + r < o_end) {
      src.chunks(o_begin + r, c0, c1, dst, kPanelStride);
    } else {
      for (int64_t c = c0; c < c1; ++c) _mm512_store_si512(dst + c * kPanelStride, _mm512_setzero_si512());
    }
  }
}
// Chunks [c0, c1) of the panels' rows [r0, r1) (by default all chunks, and all rows: up to o_end
// rounded up to whole tiles); w is BF16, F8_E4M3, I8_SM or F4_E2M1, fp8 with its scales folded in
// where fold (folds_scales). Tile-major fp8, int8 and FP4 weights (o_begin, r0 and r1 multiples
// of 16; tile-major bf16 is read in place, never copied: reads_in_place) copy whole
// tiles, block by block (byte codes converted in pair order, then transposed into rows; rows past
// o_end: the tile's stored rows, zero past n_out; their outputs are never stored).
inline void copy_panels(const LinearWeight& w, bool fold, int64_t o_begin, int64_t o_end, uint16_t* panels,
                        int64_t c0 = 0, int64_t c1 = -1, int64_t r0 = 0, int64_t r1 = -1) {
  const int64_t kc = (w.n_in + kChunk - 1) / kChunk;
  if (c1 < 0) c1 = kc;
  if (r1 < 0) r1 = (o_end - o_begin + kTile - 1) / kTile * kTile;
  if (w.tile_major) {
    const Avx512Bf16::Fp8Lut lut(w.dtype);
    for (int64_t t = r0 / kTile; t < r1 / kTile; ++t) {
      ScaleWalk scales;
      if (fold) scales = ScaleWalk(w, o_begin + t * kTile, c0);
      for (int64_t c = c0; c < c1; ++c) {
        uint16_t* dst = panels + (t * kc + c) * kPanelStride;
        if (!has_block_scales(w.dtype)) {
          fp4_tile_block(w, kc, o_begin / kTile + t, c, dst);
          continue;
        }
        alignas(64) uint16_t pairs[kBlockElems];  // pair p of the 16 rows at 32p: transposed into rows
        pair_block(lut, w, kc, o_begin / kTile + t, c, pairs, fold ? &scales : nullptr);
        transpose16_by([&](int p) { return _mm512_load_si512(pairs + p * 32); },
                       [&](int i, __m512i v) { _mm512_store_si512(dst + i * 32, v); });
      }
    }
    return;
  }
  switch (w.dtype) {
    case DType::F8_E4M3:
    case DType::I8_SM: return copy_panels_from(Fp8Source(w, fold), w.n_in, o_begin, o_end, panels, c0, c1, r0, r1);
    case DType::F4_E2M1: return copy_panels_from(Fp4Source(w), w.n_in, o_begin, o_end, panels, c0, c1, r0, r1);
    default: return copy_panels_from(Bf16Source(w), w.n_in, o_begin, o_end, panels, c0, c1, r0, r1);
  }
}

// Accumulator tiles: tmm0 = (a 0, b 0), tmm1 = (0, 1), tmm2 = (1, 0), tmm3 = (1, 1), held in
// memory as acc[b][a] between K blocks, rows `stride` bytes apart (64: 16 token columns;
// stream_fp4's narrow tiles: 4 * n).
template <int NA, int NB>
inline void acc_load(float (*const (&acc)[2])[kTile * kTile]) {
  _tile_loadd(0, acc[0][0], 64);
  if constexpr (NB > 1) _tile_loadd(1, acc[1][0], 64);
  if constexpr (NA > 1) _tile_loadd(2, acc[0][1], 64);
  if constexpr (NA > 1 && NB > 1) _tile_loadd(3, acc[1][1], 64);
}
template <int NA, int NB>
inline void acc_store(float (*const (&acc)[2])[kTile * kTile], int64_t stride = 64) {
  _tile_stored(0, acc[0][0], stride);
  if constexpr (NB > 1) _tile_stored(1, acc[1][0], stride);
  if constexpr (NA > 1) _tile_stored(2, acc[0][1], stride);
  if constexpr (NA > 1 && NB > 1) _tile_stored(3, acc[1][1], stride);
}
template <int NA, int NB>
inline void acc_zero() {
  _tile_zero(0);
  if constexpr (NB > 1) _tile_zero(1);
  if constexpr (NA > 1) _tile_zero(2);
  if constexpr (NA > 1 && NB > 1) _tile_zero(3);
}

// Where weight tile a's chunk c is read: tile[a] + c * step, its rows `stride` bytes apart. Either
// panels (step kPanelStride, stride 64), or, for a single token tile, bf16 weight rows as stored
// (step 32, stride n_in * 2; the hardware prefetchers follow the rows, and software prefetches
// measured slower), or bf16 weights relaid tile-major (step kBlockElems, stride 64): the same values
// every way.
struct WeightTilesAt {
  const uint16_t* tile[2];
  int64_t step, stride;

  static WeightTilesAt panels(const uint16_t* t0, const uint16_t* t1) { return {{t0, t1}, kPanelStride, 64}; }
  static WeightTilesAt rows(const uint16_t* t0, const uint16_t* t1, int64_t n_in) { return {{t0, t1}, kChunk, n_in * 2}; }
  // Tile t0 of tile-major bf16 weight w0 and tile t1 of w1 (of w0's shape) where they lie: chunk c of
  // tile t is the 1 KiB block t * kc + c, its rows 64 bytes apart (LinearWeight::tile_major).
  static WeightTilesAt blocks(const LinearWeight& w0, int64_t t0, const LinearWeight& w1, int64_t t1, int64_t kc) {
    const auto at = [&](const LinearWeight& w, int64_t t) { return static_cast<const uint16_t*>(w.data) + t * kc * kBlockElems; };
    return {{at(w0, t0), at(w1, t1)}, kBlockElems, 64};
  }
};

// The accumulators (+)= chunk c of weight tiles a < NA x token tiles b < NB.
// Tiles read in place (WeightTilesAt::blocks) with one token tile prefetch their chunk kTileAhead
// bytes on, two chunks (bf16 twin, batch 1: 19.6-21.8 tok/s without, 21.6-22.1 with, 18.3-19.4 four
// chunks on).
template <int NA, int NB>
inline void chunk_step(const WeightTilesAt& wa, const uint16_t* const (&tb)[2], int64_t c) {
  if (NB == 1 && wa.step == kBlockElems)
    for (int a = 0; a < NA; ++a) {
      const char* next = reinterpret_cast<const char*>(wa.tile[a] + c * kBlockElems) + kTileAhead;
      for (int q = 0; q < kBlockElems * 2; q += 64) _mm_prefetch(next + q, _MM_HINT_T0);
    }
  _tile_loadd(4, wa.tile[0] + c * wa.step, wa.stride);
  if constexpr (NA > 1) _tile_loadd(5, wa.tile[1] + c * wa.step, wa.stride);
  _tile_loadd(6, tb[0] + c * kBlockElems, 64);
  if constexpr (NB > 1) _tile_loadd(7, tb[1] + c * kBlockElems, 64);
  _tile_dpbf16ps(0, 4, 6);
  if constexpr (NB > 1) _tile_dpbf16ps(1, 4, 7);
  if constexpr (NA > 1) _tile_dpbf16ps(2, 5, 6);
  if constexpr (NA > 1 && NB > 1) _tile_dpbf16ps(3, 5, 7);
}

// The next group's panel copies (up to two weights), run while this group computes so that their
// memory reads overlap the tile arithmetic: a K block's share at a time, or with one token tile a
// share of whole rows after each chunk (group_pass).
struct NextCopy {
  const LinearWeight* w[2] = {nullptr, nullptr};
  bool fold = false;               // folds_scales of the next group
  int64_t o_begin = 0, o_end = 0;  // rows of each weight
  uint16_t* panels[2] = {nullptr, nullptr};

  void run(int64_t c0, int64_t c1) const {
    for (int i = 0; i < 2; ++i)
      if (w[i]) copy_panels(*w[i], fold, o_begin, o_end, panels[i], c0, c1);
  }
  // Share `part` of n_parts of the rows, every chunk: each row read front to back.
  void run_rows(int64_t part, int64_t n_parts) const {
    const int64_t n_rows = (o_end - o_begin + kTile - 1) / kTile * kTile;
    for (int i = 0; i < 2; ++i)
      if (w[i])
        copy_panels(*w[i], fold, o_begin, o_end, panels[i], 0, -1, part * n_rows / n_parts, (part + 1) * n_rows / n_parts);
  }
};

// acc[b][a] (+)= chunks [c0, c1) of weight tile a x token tile b (tb[b]); from zero when c0 == 0.
// With rows_next, share c of kc of the next group's rows is copied after chunk c.
template <int NA, int NB>
inline void k_block(const WeightTilesAt& wa, const uint16_t* const (&tb)[2], int64_t c0, int64_t c1, int64_t kc,
                    const NextCopy* rows_next, float (*const (&acc)[2])[kTile * kTile]) {
  if (c0 == 0) acc_zero<NA, NB>();
  else acc_load<NA, NB>(acc);
  for (int64_t c = c0; c < c1; ++c) {
    chunk_step<NA, NB>(wa, tb, c);
    if (rows_next) rows_next->run_rows(c, kc);
  }
  acc_store<NA, NB>(acc);
}

// fp8 and int8 weights: the scales of weight tile a's row block (one per column block; or with a
// scale row per output, those of its first row, row_step floats apart from the next row's, of which
// `rows[a]` exist) and the chunks per column block (block_cols / 32).
struct BlockScales {
  const float* row[2];
  int64_t bc;
  int64_t row_step = 0;  // 0: the tile's 16 rows share row[a]
  int rows[2] = {kTile, kTile};
};

// The scales of weight tile a's block blk across lanes: the block's in every lane, or per-row
// scales, output r's in lane r (0 past rows[a]).
inline __m512 tile_scales(const BlockScales& bs, int a, int64_t blk) {
  if (!bs.row_step) return _mm512_set1_ps(bs.row[a][blk]);
  const __m512i at = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                        _mm512_set1_epi32(int(bs.row_step)));
  return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), __mmask16((1u << bs.rows[a]) - 1u), at, bs.row[a] + blk, 4);
}

// tot[b][a] = fma(part[b][a], scale of tile a's block blk, tot[b][a]) lane-wise ([16 outputs, 16
// tokens]: row r takes output r's scale), tot from zero at blk 0.
template <int NA, int NB>
inline void scale_into(float (*const (&part)[2])[kTile * kTile], float (*const (&tot)[2])[kTile * kTile],
                       const BlockScales& bs, int64_t blk) {
  for (int a = 0; a < NA; ++a) {
    const __m512 s16 = tile_scales(bs, a, blk);
    for (int b = 0; b < NB; ++b) {
      const float* p = part[b][a];
      float* t = tot[b][a];
      for (int i = 0; i < kTile * kTile; i += 16) {
        const __m512 s = bs.row_step ? _mm512_permutexvar_ps(_mm512_set1_epi32(i / kTile), s16) : s16;
        const __m512 prev = blk == 0 ? _mm512_setzero_ps() : _mm512_load_ps(t + i);
        _mm512_store_ps(t + i, _mm512_fmadd_ps(_mm512_load_ps(p + i), s, prev));
      }
    }
  }
}

// As k_block for fp8 weights (kc chunks in all): each scale block's chunks accumulate from zero,
// and at the block's end (or at kc) the partial goes into tot (scale_into); part holds a block's
// partial across K blocks.
template <int NA, int NB>
inline void k_block_scaled(const WeightTilesAt& wa, const uint16_t* const (&tb)[2], int64_t c0, int64_t c1, int64_t kc,
                           const NextCopy* rows_next, const BlockScales& bs, float (*const (&part)[2])[kTile * kTile],
                           float (*const (&tot)[2])[kTile * kTile]) {
  if (c0 % bs.bc == 0) acc_zero<NA, NB>();
  else acc_load<NA, NB>(part);
  for (int64_t c = c0; c < c1; ++c) {
    chunk_step<NA, NB>(wa, tb, c);
    if (rows_next) rows_next->run_rows(c, kc);
    if ((c + 1) % bs.bc == 0 || c + 1 == kc) {
      acc_store<NA, NB>(part);
      scale_into<NA, NB>(part, tot, bs, c / bs.bc);
      if (c + 1 < c1) acc_zero<NA, NB>();
    } else if (c + 1 == c1) {
      acc_store<NA, NB>(part);
    }
  }
}

// Token tiles [tt0, tt1) against weight tiles a < NA, all kc chunks: acc[t - tt0][a], or for
// fp8 weights (bs) the scaled totals in tot[t - tt0][a] (acc then holds partials).
template <int NA>
inline void group_pass(const WeightTilesAt& wa, int64_t kc, const uint16_t* packed, int64_t tt0, int64_t tt1,
                       const NextCopy& next, const BlockScales* bs, float (*acc)[2][kTile * kTile],
                       float (*tot)[2][kTile * kTile]) {
  const int64_t tile_elems = kc * kBlockElems;
  // With one token tile (decode) the arithmetic per K block is too short to hide a K block of
  // every row of the next group behind (32 row streams advancing 256 bytes at a time kept fp8
  // weights at half the memory speed, the loads waiting on misses): the next group's rows are
  // then copied whole, each read front to back, a share of them after each chunk's tiles.
  const NextCopy* rows_next = tt1 - tt0 == 1 && next.w[0] ? &next : nullptr;
  for (int64_t c0 = 0; c0 < kc; c0 += kKBlock) {
    const int64_t c1 = std::min(kc, c0 + kKBlock);
    if (!rows_next) next.run(c0, c1);
    for (int64_t tt = tt0; tt < tt1; tt += 2) {
      const bool two = tt + 1 < tt1;
      const int64_t t2 = tt - tt0 + (two ? 1 : 0);
      const uint16_t* tb[2] = {packed + tt * tile_elems, packed + (two ? tt + 1 : tt) * tile_elems};
      float (*const a[2])[kTile * kTile] = {acc[tt - tt0], acc[t2]};
      if (bs) {
        float (*const t[2])[kTile * kTile] = {tot[tt - tt0], tot[t2]};
        if (two) k_block_scaled<NA, 2>(wa, tb, c0, c1, kc, nullptr, *bs, a, t);
        else k_block_scaled<NA, 1>(wa, tb, c0, c1, kc, rows_next, *bs, a, t);
      } else if (two) {
        k_block<NA, 2>(wa, tb, c0, c1, kc, nullptr, a);
      } else {
        k_block<NA, 1>(wa, tb, c0, c1, kc, rows_next, a);
      }
    }
  }
}

// The n <= 16 tokens of one token tile (tb) against tile t[a] of tile-major FP4 weight w[a], a < NA,
// on tiles configured n tokens wide (TileScope(TileConfig(n))): each chunk's blocks are converted
// into an L1 ring of two one chunk ahead, while the previous chunk's tiles run, so the weights
// stream from memory in order and no panel round-trips through L2. The chunk order and the
// arithmetic are group_pass's with one token tile (k_block), bit for bit. out[a] holds tile a's
// outputs as [16 outputs, n tokens] (output i, token j at i * n + j).
template <int NA>
inline void stream_fp4(const LinearWeight* const (&w)[2], const int64_t (&t)[2], int64_t kc, const uint16_t* tb, int n,
                       float (&out)[2][kTile * kTile]) {
  alignas(64) uint16_t ring[2][2][kBlockElems];
  const uint16_t* const tbs[2] = {tb, tb};
  float (*const total[2])[kTile * kTile] = {out, out};
  acc_zero<NA, 1>();
  for (int a = 0; a < NA; ++a) fp4_tile_block(*w[a], kc, t[a], 0, ring[0][a]);
  for (int64_t c = 0; c < kc; ++c) {
    uint16_t(&slot)[2][kBlockElems] = ring[c & 1];
    if (c + 1 < kc)
      for (int a = 0; a < NA; ++a) fp4_tile_block(*w[a], kc, t[a], c + 1, ring[(c + 1) & 1][a]);
    chunk_step<NA, 1>(WeightTilesAt{{slot[0], slot[NA - 1]}, 0, 64}, tbs, c);
  }
  acc_store<NA, 1>(total, 4 * n);
}

// The n <= 16 tokens' bf16 rows, token_rows(packed token tile) (act + 512c: chunk c of the 16
// tokens, 32 elements each), against tile t[a] of tile-major fp8 or int8 weight w[a], a < NA, with
// the weights as the B operand (TileScope(TileConfig::pairs(n))): each chunk's blocks, stored in
// pair order, are converted into an L1 ring as they are and multiply the tokens' rows; C is then
// [n tokens, 16 outputs]. Each scale block's chunks accumulate from zero, its partial goes into
// out[a] as fma(partial, scale, total), total from zero; or, with the scales folded (bs nullptr),
// every chunk in one accumulator: per output, the products and the order of group_pass's
// k_block_scaled or k_block, whose tiles have the weights as A (TDPBF16PS's arithmetic per element
// is the same with the operands' roles swapped), so bit for bit. out[a] holds tile a's outputs as
// [n tokens, 16 outputs] (token j, output i at 16j + i).
template <int NA>
inline void stream_pairs(const LinearWeight* const (&w)[2], const int64_t (&t)[2], int64_t kc, const uint16_t* act, int n,
                         const BlockScales* bs, float (&out)[2][kTile * kTile]) {
  alignas(64) uint16_t ring[2][kBlockElems];
  alignas(64) float part[2][kTile * kTile];
  const Avx512Bf16::Fp8Lut lut(w[0]->dtype);
  ScaleWalk scales[2];
  if (!bs)
    for (int a = 0; a < NA; ++a) scales[a] = ScaleWalk(*w[a], t[a] * kTile, 0);
  _tile_zero(0);
  if constexpr (NA > 1) _tile_zero(1);
  for (int64_t c = 0; c < kc; ++c) {
    for (int a = 0; a < NA; ++a) pair_block(lut, *w[a], kc, t[a], c, ring[a], bs ? nullptr : &scales[a]);
    _tile_loadd(6, act + c * kBlockElems, 64);
    _tile_loadd(4, ring[0], 64);
    _tile_dpbf16ps(0, 6, 4);
    if constexpr (NA > 1) {
      _tile_loadd(5, ring[1], 64);
      _tile_dpbf16ps(1, 6, 5);
    }
    if (!bs) continue;
    if ((c + 1) % bs->bc == 0 || c + 1 == kc) {
      _tile_stored(0, part[0], 64);
      if constexpr (NA > 1) _tile_stored(1, part[1], 64);
      const int64_t blk = c / bs->bc;
      for (int a = 0; a < NA; ++a) {
        const __m512 s = tile_scales(*bs, a, blk);
        for (int j = 0; j < n; ++j) {
          const __m512 prev = blk == 0 ? _mm512_setzero_ps() : _mm512_load_ps(out[a] + j * kTile);
          _mm512_store_ps(out[a] + j * kTile, _mm512_fmadd_ps(_mm512_load_ps(part[a] + j * kTile), s, prev));
        }
      }
      _tile_zero(0);
      if constexpr (NA > 1) _tile_zero(1);
    }
  }
  if (!bs) {
    _tile_stored(0, out[0], 64);
    if constexpr (NA > 1) _tile_stored(1, out[1], 64);
  }
}

// The activation rows of the first n tokens of a packed token tile (kc chunks), so that token j's
// 32 elements of chunk c lie at 512c + 32j (per-thread buffer; rows n..15 unwritten): chunk c's
// 16 x 16 pairs transposed, or up to 4 tokens gathered a row at a time (a V4.1 batch-1 decode step
// spent 3.6 % of its time here transposing, 1.5 % gathering: the call runs per block, ~8 per thread).
inline const uint16_t* token_rows(const uint16_t* tb, int64_t kc, int n) {
  thread_local AlignedVector<uint16_t> rows;
  rows.resize(size_t(kc * kBlockElems));
  const __m512i pairs = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                           _mm512_set1_epi32(16));  // dword 16p: pair p of token 0
  for (int64_t c = 0; c < kc; ++c) {
    const uint16_t* block = tb + c * kBlockElems;
    uint16_t* out = rows.data() + c * kBlockElems;
    if (n <= 4) {
      for (int j = 0; j < n; ++j)
        _mm512_store_si512(out + j * 32, _mm512_i32gather_epi32(_mm512_add_epi32(pairs, _mm512_set1_epi32(j)), block, 4));
      continue;
    }
    transpose16_by([&](int p) { return _mm512_load_si512(block + p * 32); },
                   [&](int j, __m512i v) { _mm512_store_si512(out + j * 32, v); });
  }
  return rows.data();
}

// Writes stream_pairs' [n tokens, 16 outputs] into y[j * ldy + i] (token j < n, output i < n_out).
inline void store_rows(const float* acc, int n, int n_out, float* y, int64_t ldy) {
  const __mmask16 mk = __mmask16((1u << n_out) - 1u);
  for (int j = 0; j < n; ++j) _mm512_mask_storeu_ps(y + j * ldy, mk, _mm512_load_ps(acc + j * kTile));
}

// Writes stream_fp4's [16 outputs, n tokens] into y[j * ldy + i] (token j < n, output
// i < n_out).
inline void store_narrow(const float* acc, int n, int n_out, float* y, int64_t ldy) {
  const __mmask16 mk = __mmask16((1u << n_out) - 1u);
  if (n == 1) return _mm512_mask_storeu_ps(y, mk, _mm512_load_ps(acc));
  const __m512i rows = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi32(n));
  for (int j = 0; j < n; ++j)
    _mm512_mask_storeu_ps(y + j * ldy, mk, _mm512_i32gather_ps(_mm512_add_epi32(rows, _mm512_set1_epi32(j)), acc, 4));
}

// Per-thread panel buffer of at least n elements, on a cache line.
inline uint16_t* panel_buffer(int64_t n) {
  thread_local AlignedVector<uint16_t> buf;
  buf.resize(size_t(n));
  return buf.data();
}

inline int64_t pass_tiles(int64_t tile_elems) {
  return std::clamp<int64_t>(kPassBytes / (tile_elems * 2), 2, kMaxPassTiles);
}

// Writes a [16 outputs, 16 tokens] accumulator into y[j * ldy + i] (token j < n_tok, output
// i < n_out).
inline void store_transposed(const float* acc, int n_tok, int n_out, float* y, int64_t ldy) {
  const __mmask16 mk = __mmask16((1u << n_out) - 1u);
  transpose16_by([&](int i) { return _mm512_loadu_si512(acc + i * kTile); },
                 [&](int j, __m512i v) {
                   if (j < n_tok) _mm512_mask_storeu_epi32(y + j * ldy, mk, v);
                 });
}

// gate[i] = silu(gate[i]) * up[i], i < n (a multiple of 16): vexp.h's silu_mul_n.
inline void silu_mul(float* gate, const float* up, int n = kTile * kTile) { silu_mul_n<Avx512>(gate, up, n, gate); }

// Whether a block streams its weights straight into the tiles (bf16 as stored, one token tile, whole
// chunks) rather than through panels.
inline bool streams_weights(int64_t m, const LinearWeight& w) {
  return w.dtype == DType::BF16 && !w.tile_major && m <= kTile && w.n_in % kChunk == 0;
}

// Whether the tiles read the weights where they lie, at every m (bf16 relaid tile-major: each chunk
// of a tile is one 1 KiB block, WeightTilesAt::blocks), with no panels and no copies.
inline bool reads_in_place(const LinearWeight& w) { return w.dtype == DType::BF16 && w.tile_major; }

// Whether a block copies the next group's panels alongside the current group's tiles (else right
// before its own): always with several token tiles; with one (decode) while the two groups' panels
// (4 tiles) stay within kAheadBytes of L2 (n_in up to about 7700), as larger ones thrashed L2 (fp8
// 2048 x 10944: 5.8 GB/s copying ahead, 8.1 copying each group first).
inline bool copies_ahead(int64_t n_tt, int64_t panel_elems) { return n_tt > 1 || 4 * panel_elems * 2 <= kAheadBytes; }

// Weight tiles whose panels a block holds at once: all of them when several passes reuse them, else
// a ring (the group being computed and, copying ahead, the next), which keeps a one-pass block's
// panels in L2 however many outputs it has. group: weight tiles per group.
inline int64_t panel_slots(bool one_pass, bool ahead, int64_t n_tiles, int64_t group) {
  return one_pass ? std::min(n_tiles, ahead ? 2 * group : group) : n_tiles;
}

// Whether the calls' weights run with their block scales folded in (LinearWeight::scales_fold): a
// linear's weight, or a SwiGLU's gate and up together.
inline bool folds_scales(const LinearWeight& w0, const LinearWeight& w1) { return w0.scales_fold && w1.scales_fold; }

// fp8 and int8 weights whose scales do not fold (else nullptr): weight tiles at outputs o and
// o + 16 * (NA - 1) (multiples of 16).
inline const BlockScales* fp8_scales(const LinearWeight& w0, const LinearWeight& w1, int64_t o0, int64_t o1,
                                     BlockScales& bs) {
  if (!has_block_scales(w0.dtype) || folds_scales(w0, w1)) return nullptr;
  const int64_t n_cb = (w0.n_in + w0.block_cols - 1) / w0.block_cols;  // w1 has w0's shape and blocks
  const auto row = [&](const LinearWeight& w, int64_t o) { return w.scale_inv + o / w.block_rows * n_cb; };
  bs = {{row(w0, o0), row(w1, o1)}, w0.block_cols / kChunk};
  if (w0.block_rows == 1) {
    bs.row_step = n_cb;
    bs.rows[0] = int(std::min<int64_t>(kTile, w0.n_out - o0));
    bs.rows[1] = int(std::min<int64_t>(kTile, w1.n_out - o1));
  }
  return &bs;
}

// linear_block_packed (kernel_table.h): the block's weights copied into panels (or streamed),
// then per pass of token tiles, output tiles in pairs.
inline void linear_block_packed(const uint16_t* packed, int64_t m, const LinearWeight& w, int64_t o_begin,
                                int64_t o_end, float* y, int64_t ldy) {
  const int64_t kc = (w.n_in + kChunk - 1) / kChunk, tile_elems = kc * kBlockElems;
  const int64_t n_tiles = (o_end - o_begin + kTile - 1) / kTile, n_tt = (m + kTile - 1) / kTile;
  const int64_t panel_elems = kc * kPanelStride;
  const bool stream = streams_weights(m, w);
  const int64_t per_pass = pass_tiles(tile_elems);
  const bool one_pass = n_tt <= per_pass, ahead = copies_ahead(n_tt, panel_elems);
  const bool in_place = reads_in_place(w);
  const bool tile_stream = w.tile_major && !in_place && n_tt == 1;  // stream_pairs or stream_fp4: no panels
  const bool pairs = tile_stream && has_block_scales(w.dtype);
  const uint16_t* act = pairs ? token_rows(packed, kc, int(m)) : nullptr;
  const int64_t n_slots = tile_stream || in_place ? 0 : panel_slots(one_pass, ahead, n_tiles, 2);
  uint16_t* panels = panel_buffer(n_slots * panel_elems);
  const auto panel = [&](int64_t i) { return panels + i % n_slots * panel_elems; };  // weight tile i's
  const uint16_t* base = static_cast<const uint16_t*>(w.data);
  const bool fold = folds_scales(w, w);
  alignas(64) float acc[kMaxPassTiles][2][kTile * kTile];
  alignas(64) float tot[kMaxPassTiles][2][kTile * kTile];  // fp8 and int8 only
  TileScope tiles(pairs ? TileConfig::pairs(int(m)) : TileConfig(tile_stream ? int(m) : kTile));
  for (int64_t tt0 = 0; tt0 < n_tt; tt0 += per_pass) {
    const int64_t tt1 = std::min(n_tt, tt0 + per_pass);
    for (int64_t i = 0; i < n_tiles; i += 2) {
      const int na = i + 1 < n_tiles ? 2 : 1;
      const int64_t o0 = o_begin + i * kTile;
      BlockScales bs_storage;
      const BlockScales* bs = fp8_scales(w, w, o0, o0 + (na - 1) * kTile, bs_storage);
      if (tile_stream) {
        const LinearWeight* const ws[2] = {&w, &w};
        const int64_t ts[2] = {o0 / kTile, o0 / kTile + na - 1};
        if (pairs && na == 2) stream_pairs<2>(ws, ts, kc, act, int(m), bs, acc[0]);
        else if (pairs) stream_pairs<1>(ws, ts, kc, act, int(m), bs, acc[0]);
        else if (na == 2) stream_fp4<2>(ws, ts, kc, packed, int(m), acc[0]);
        else stream_fp4<1>(ws, ts, kc, packed, int(m), acc[0]);
        for (int a = 0; a < na; ++a) {
          const int64_t o = o0 + a * kTile;
          const int n_valid = int(std::min<int64_t>(kTile, o_end - o));
          if (pairs) store_rows(acc[0][a], int(m), n_valid, y + (o - o_begin), ldy);
          else store_narrow(acc[0][a], int(m), n_valid, y + (o - o_begin), ldy);
        }
        continue;
      }
      WeightTilesAt wa = in_place ? WeightTilesAt::blocks(w, o0 / kTile, w, o0 / kTile + na - 1, kc)
                                  : WeightTilesAt::panels(panel(i), panel(i + na - 1));
      NextCopy next;
      if (!in_place && !stream && tt0 == 0) {  // the first pass copies the panels: the first group's now, each next one alongside
        if (i == 0 || !ahead) copy_panels(w, fold, o0, std::min(o_end, o0 + na * kTile), panel(i));
        if (ahead && i + 2 < n_tiles) {
          next.w[0] = &w;
          next.fold = fold;
          next.o_begin = o0 + 2 * kTile;
          next.o_end = std::min(o_end, next.o_begin + 2 * kTile);
          next.panels[0] = panel(i + 2);
        }
      }
      if (stream && o0 + na * kTile <= w.n_out) {
        wa = WeightTilesAt::rows(base + o0 * w.n_in, base + (o0 + (na - 1) * kTile) * w.n_in, w.n_in);
      } else if (stream) {  // rows past the matrix: through a panel of these tiles
        copy_panels(w, fold, o0, std::min(o_end, o0 + na * kTile), panels);
        wa = WeightTilesAt::panels(panels, panels + (na - 1) * panel_elems);
      }
      if (na == 2) group_pass<2>(wa, kc, packed, tt0, tt1, next, bs, acc, tot);
      else group_pass<1>(wa, kc, packed, tt0, tt1, next, bs, acc, tot);
      float (*const out)[2][kTile * kTile] = bs ? tot : acc;
      for (int64_t tt = tt0; tt < tt1; ++tt)
        for (int a = 0; a < na; ++a) {
          const int64_t t = tt * kTile, o = o0 + a * kTile;
          store_transposed(out[tt - tt0][a], int(std::min<int64_t>(kTile, m - t)), int(std::min<int64_t>(kTile, o_end - o)),
                           y + t * ldy + (o - o_begin), ldy);
        }
    }
  }
}

// swiglu_block_packed (kernel_table.h): each gate tile with the up tile of the same 16 outputs.
inline void swiglu_block_packed(const uint16_t* packed, int64_t m, const LinearWeight& gate, const LinearWeight& up,
                                int64_t o_begin, int64_t o_end, float* y, int64_t ldy) {
  const int64_t kc = (gate.n_in + kChunk - 1) / kChunk, tile_elems = kc * kBlockElems;
  const int64_t n_tiles = (o_end - o_begin + kTile - 1) / kTile, n_tt = (m + kTile - 1) / kTile;
  const int64_t panel_elems = kc * kPanelStride;
  const bool stream = streams_weights(m, gate);
  const int64_t per_pass = pass_tiles(tile_elems);
  const bool ahead = copies_ahead(n_tt, panel_elems);
  const bool in_place = reads_in_place(gate);
  const bool tile_stream = gate.tile_major && !in_place && n_tt == 1;  // stream_pairs or stream_fp4: no panels
  const bool pairs = tile_stream && has_block_scales(gate.dtype);
  const uint16_t* act = pairs ? token_rows(packed, kc, int(m)) : nullptr;
  const int64_t n_slots = tile_stream || in_place ? 0 : panel_slots(n_tt <= per_pass, ahead, n_tiles, 1);
  uint16_t* gate_panels = panel_buffer(2 * n_slots * panel_elems);
  uint16_t* up_panels = gate_panels + n_slots * panel_elems;
  const auto slot = [&](int64_t i) { return i % n_slots * panel_elems; };  // of output tile i's panels
  const uint16_t *g_base = static_cast<const uint16_t*>(gate.data), *u_base = static_cast<const uint16_t*>(up.data);
  const bool fold = folds_scales(gate, up);
  alignas(64) float acc[kMaxPassTiles][2][kTile * kTile];
  alignas(64) float tot[kMaxPassTiles][2][kTile * kTile];  // fp8 and int8 only
  TileScope tiles(pairs ? TileConfig::pairs(int(m)) : TileConfig(tile_stream ? int(m) : kTile));
  for (int64_t tt0 = 0; tt0 < n_tt; tt0 += per_pass) {
    const int64_t tt1 = std::min(n_tt, tt0 + per_pass);
    for (int64_t i = 0; i < n_tiles; ++i) {
      const int64_t o = o_begin + i * kTile;
      BlockScales bs_storage;
      const BlockScales* bs = fp8_scales(gate, up, o, o, bs_storage);
      if (tile_stream) {
        const LinearWeight* const ws[2] = {&gate, &up};
        const int64_t ts[2] = {o / kTile, o / kTile};
        if (pairs) stream_pairs<2>(ws, ts, kc, act, int(m), bs, acc[0]);
        else stream_fp4<2>(ws, ts, kc, packed, int(m), acc[0]);
        silu_mul(acc[0][0], acc[0][1], int(kTile * m));
        const int n_valid = int(std::min<int64_t>(kTile, o_end - o));
        if (pairs) store_rows(acc[0][0], int(m), n_valid, y + (o - o_begin), ldy);
        else store_narrow(acc[0][0], int(m), n_valid, y + (o - o_begin), ldy);
        continue;
      }
      WeightTilesAt wa = in_place ? WeightTilesAt::blocks(gate, o / kTile, up, o / kTile, kc)
                                  : WeightTilesAt::panels(gate_panels + slot(i), up_panels + slot(i));
      NextCopy next;
      if (!in_place && !stream && tt0 == 0) {  // the first pass copies the panels: the first tile's now, each next one alongside
        if (i == 0 || !ahead) {
          copy_panels(gate, fold, o, std::min(o_end, o + kTile), gate_panels + slot(i));
          copy_panels(up, fold, o, std::min(o_end, o + kTile), up_panels + slot(i));
        }
        if (ahead && i + 1 < n_tiles) {
          next.w[0] = &gate;
          next.w[1] = &up;
          next.fold = fold;
          next.o_begin = o + kTile;
          next.o_end = std::min(o_end, next.o_begin + kTile);
          next.panels[0] = gate_panels + slot(i + 1);
          next.panels[1] = up_panels + slot(i + 1);
        }
      }
      if (stream && o + kTile <= gate.n_out) {
        wa = WeightTilesAt::rows(g_base + o * gate.n_in, u_base + o * gate.n_in, gate.n_in);
      } else if (stream) {  // rows past the matrix: through panels of this tile
        copy_panels(gate, fold, o, std::min(o_end, o + kTile), gate_panels);
        copy_panels(up, fold, o, std::min(o_end, o + kTile), up_panels);
        wa = WeightTilesAt::panels(gate_panels, up_panels);
      }
      group_pass<2>(wa, kc, packed, tt0, tt1, next, bs, acc, tot);
      float (*const out)[2][kTile * kTile] = bs ? tot : acc;
      for (int64_t tt = tt0; tt < tt1; ++tt) {
        const int64_t t = tt * kTile;
        silu_mul(out[tt - tt0][0], out[tt - tt0][1]);
        store_transposed(out[tt - tt0][0], int(std::min<int64_t>(kTile, m - t)), int(std::min<int64_t>(kTile, o_end - o)),
                         y + t * ldy + (o - o_begin), ldy);
      }
    }
  }
}

}  // namespace deepinfer::cpu::amx
