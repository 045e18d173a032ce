// The avx512bf16 level's packed blocks (kernel_table.h): fp8 (e4m3) and int8 (I8_SM) weights with
// block scales against bf16 activation rows on VDPBF16PS, one output per lane. Included only by
// kernels_avx512bf16.cpp, compiled for it and run only where the CPU has it.
//
// Operands. A weight tile is 16 rows; its chunk c (columns [32c, 32c + 32)) is 16 vectors of bf16
// pairs, pair p's vector holding (w[r][32c + 2p], w[r][32c + 2p + 1]) in lane r: the codes of a
// tile-major weight (gemm.h's relay_weight; pair order) converted as they lie, or a stored weight's
// 16 rows' codes transposed into pair order in registers, then converted, exactly either way
// (Avx512Bf16::fp8x64_to_bf16). Activations:
// each row rounded to bf16 and zero-padded to whole chunks (pack_rows), one pair of it broadcast to
// every lane. A register tile is MR rows x NT weight tiles of accumulators (for_row_tiles, up to
// 6 x 4), so each pair's weight vector feeds MR products and each broadcast NT.
//
// Bits. Output o of row i is lane o % 16 of its tile's accumulator for row i: per scale block, a
// partial from zero takes VDPBF16PS(partial, pair p of row i broadcast, pair p of the tile) for the
// block's pairs in ascending order (zero pairs past n_in), then total = fma(partial, scale, total)
// (f32, from zero), blocks in order. Nothing else touches it, so its bits depend only on its weight
// row and its activation row: never on m, the register tile, the tile group, the pass, the column
// block, the thread or the weight's layout (relaid or stored). Against the dequantized weights
// (code * scale, in double) with the bf16-rounded activations the products are exact and only
// roundings remain: at most one per product added within a scale block, one for each block's
// scaled partial and one for its addition into the total, so to first order
// |error| <= (n_in + 2 * n_blocks) * 2^-24 * sum_i |x_i * w_i * scale_i| (simd_amx.h's bound).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/aligned_vector.h"
#include "core/dtype.h"
#include "kernels/cpu/amx_weight_rows.h"
#include "kernels/cpu/row_tiles.h"
#include "kernels/cpu/simd_avx512_bf16.h"
#include "kernels/cpu/vexp.h"
#include "kernels/ops.h"

namespace deepinfer::cpu::pair_tiles {

constexpr int kTile = 16;        // outputs per weight tile (lanes)
constexpr int64_t kChunk = 32;   // columns per chunk: 16 pairs
constexpr int kChunkElems = 512; // bf16 elements of a converted tile chunk: [16 pairs, 16 rows, 2]
constexpr int kGroup = 4;        // weight tiles per register tile

// Packed activations: row r at r * row_elems(n_in), bf16, zero past n_in.
inline int64_t row_elems(int64_t n_in) { return (n_in + kChunk - 1) / kChunk * kChunk; }
inline int64_t packed_elems(int64_t m, int64_t n_in) { return m * row_elems(n_in); }
inline void pack_rows(const float* const* x, int64_t m, int64_t n_in, uint16_t* packed) {
  const int64_t ld = row_elems(n_in);
  for (int64_t r = 0; r < m; ++r) {
    Avx512Bf16::round_to_bf16(x[r], packed + r * ld, n_in);
    std::fill(packed + r * ld + n_in, packed + (r + 1) * ld, uint16_t(0));
  }
}

// packs (kernel_table.h): fp8 and int8 weights whose column blocks hold whole chunks and whose row
// blocks whole tiles or single rows.
inline bool packs(const LinearWeight& w) {
  return has_block_scales(w.dtype) && w.block_cols % kChunk == 0 && (w.block_rows % kTile == 0 || w.block_rows == 1);
}

// Weight tile t of w: rows [16t, 16t + 16).
struct TileRef {
  const LinearWeight* w;
  int64_t t;
};

// The scales of a tile's scale block blk per lane: its row block's in every lane, or with a scale
// per row, row r's in lane r (0 past n_out).
inline __m512 tile_scales(const TileRef& tile, int64_t blk) {
  const LinearWeight& w = *tile.w;
  const int64_t n_cb = (w.n_in + w.block_cols - 1) / w.block_cols;
  if (w.block_rows != 1) return _mm512_set1_ps(w.scale_inv[tile.t * kTile / w.block_rows * n_cb + blk]);
  const int rows = int(std::min<int64_t>(kTile, w.n_out - tile.t * kTile));
  const __m512i at = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                        _mm512_set1_epi32(int(n_cb)));
  return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), __mmask16((1u << rows) - 1u), at,
                                  w.scale_inv + tile.t * kTile * n_cb + blk, 4);
}

// A stored weight's 16 rows x 64 columns (2 chunks), a[i] holding row i's 64 codes, transposed in
// registers into pair order: on return a[8h + q] holds chunk h's pairs 2q and 2q + 1 as the relay
// lays them (32 bytes each, row r's 2 codes at 2r). Each row's words (pairs) are first put where
// three rounds of in-lane interleaves and one of lane permutes take them.
__attribute__((always_inline)) inline void transpose_codes(__m512i (&a)[16]) {
  // Word j of lane L of the interleaved rows ends as pair 8L + j's column: word 8L + j of a row
  // must hold pair 2j (L = 0), 2j + 1 (L = 1), 16 + 2j (L = 2), 17 + 2j (L = 3).
  alignas(64) static constexpr uint16_t kOrder[32] = {0,  2,  4,  6,  8,  10, 12, 14, 1,  3,  5,  7,  9,  11, 13, 15,
                                                       16, 18, 20, 22, 24, 26, 28, 30, 17, 19, 21, 23, 25, 27, 29, 31};
  const __m512i order = _mm512_load_si512(kOrder);
  __m512i t[16], u[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) a[i] = _mm512_permutexvar_epi16(order, a[i]);
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {  // dword j of t[2i] (t[2i + 1]): word j (4 + j) of rows 2i, 2i + 1
    t[2 * i] = _mm512_unpacklo_epi16(a[2 * i], a[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi16(a[2 * i], a[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {  // qword j of u[4g + k]: word 2k + j of rows 4g .. 4g + 3
    u[4 * g] = _mm512_unpacklo_epi32(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm512_unpackhi_epi32(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm512_unpacklo_epi32(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm512_unpackhi_epi32(t[4 * g + 1], t[4 * g + 3]);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h)  // lane L of t[8h + k]: word 8L + k of rows 8h .. 8h + 7
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      t[8 * h + 2 * j] = _mm512_unpacklo_epi64(u[8 * h + j], u[8 * h + 4 + j]);
      t[8 * h + 2 * j + 1] = _mm512_unpackhi_epi64(u[8 * h + j], u[8 * h + 4 + j]);
    }
  const __m512i first = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
  const __m512i second = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {  // lanes 0, 1 (2, 3) of rows 0-7 and 8-15: chunk 0's (1's) pairs 2k, 2k + 1
    a[k] = _mm512_permutex2var_epi64(t[k], first, t[8 + k]);
    a[8 + k] = _mm512_permutex2var_epi64(t[k], second, t[8 + k]);
  }
}

// Columns [k, k + 64) of a stored weight's tile in pair order (transpose_codes): its 16 rows from
// `rows`, n_in codes each, rows from `valid` on and columns past n_in read as zero (masked loads,
// which do not fault). The tile after it, whose rows follow in memory, is prefetched into L2 a 64th
// at a time in address order: read 64 bytes from each of 16 rows in turn, a weight streams at about
// half the rate of one read front to back.
__attribute__((always_inline)) inline void load_stored_pairs(const uint8_t* rows, int64_t n_in, int valid, int64_t k,
                                                             __m512i (&a)[16]) {
  const __mmask64 cols = n_in - k >= 64 ? ~__mmask64(0) : __mmask64((uint64_t(1) << (n_in - k)) - 1);
  const char* next = reinterpret_cast<const char*>(rows + kTile * n_in + 16 * k);
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) _mm_prefetch(next + 64 * i, _MM_HINT_T1);
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) a[i] = _mm512_maskz_loadu_epi8(i < valid ? cols : 0, rows + i * n_in + k);
  transpose_codes(a);
}

// Chunks [c0, c0 + n) of a tile as bf16 pairs: chunk c0 + j's pair p of the 16 rows at
// dst + 512j + 32p (rows past n_out as stored by the relay, or zero; their outputs are never
// stored). Tile-major codes convert as they lie; stored ones 64 columns at a time once in pair
// order (load_stored_pairs).
inline void convert_chunks(const Avx512Bf16::Fp8Lut& lut, const TileRef& tile, int64_t c0, int64_t n, uint16_t* dst) {
  const LinearWeight& w = *tile.w;
  const int64_t kc = (w.n_in + kChunk - 1) / kChunk;
  if (w.tile_major) {
    for (int64_t j = 0; j < n; ++j) amx::pair_block(lut, w, kc, tile.t, c0 + j, dst + j * kChunkElems);
    return;
  }
  const uint8_t* rows = static_cast<const uint8_t*>(w.data) + tile.t * kTile * w.n_in;
  const int valid = int(std::min<int64_t>(kTile, w.n_out - tile.t * kTile));
  for (int64_t j = 0; j < n; j += 2) {
    __m512i a[16];
    load_stored_pairs(rows, w.n_in, valid, (c0 + j) * kChunk, a);
    for (int64_t h = 0; h < std::min<int64_t>(2, n - j); ++h)
#pragma GCC unroll 8
      for (int q = 0; q < 8; ++q) {
        __m512i w0, w1;
        Avx512Bf16::fp8x64_to_bf16(lut, a[8 * h + q], w0, w1);
        _mm512_store_si512(dst + (j + h) * kChunkElems + 64 * q, w0);
        _mm512_store_si512(dst + (j + h) * kChunkElems + 64 * q + 32, w1);
      }
  }
}

// One scale block of MR rows x NT tiles: n_ch chunks of converted tiles (tile n's chunk cc at
// wp + (n * span + cc) * kChunkElems) against rows x + i * ldx (the block's first column),
// then tot[i * ldt + 16n + lane] = fma(partial, scales[16n + lane], first ? 0 : tot[...]).
// Not inlined: the MR x NT accumulators need the registers to themselves.
template <int MR, int NT>
__attribute__((noinline)) void block_tile(const uint16_t* x, int64_t ldx, const uint16_t* wp, int64_t span,
                                          int64_t n_ch, const float* scales, float* tot, int64_t ldt, bool first) {
  __m512 part[MR][NT];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int n = 0; n < NT; ++n) part[i][n] = _mm512_setzero_ps();
  for (int64_t cc = 0; cc < n_ch; ++cc)
    for (int p = 0; p < 16; ++p) {
      __m512i wv[NT];
#pragma GCC unroll 4
      for (int n = 0; n < NT; ++n) wv[n] = _mm512_load_si512(wp + (n * span + cc) * kChunkElems + p * 32);
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        const __m512i a = _mm512_broadcastd_epi32(_mm_loadu_si32(x + i * ldx + cc * kChunk + 2 * p));
#pragma GCC unroll 4
        for (int n = 0; n < NT; ++n) part[i][n] = _mm512_dpbf16_ps(part[i][n], __m512bh(a), __m512bh(wv[n]));
      }
    }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int n = 0; n < NT; ++n) {
      float* t = tot + i * ldt + n * kTile;
      const __m512 prev = first ? _mm512_setzero_ps() : _mm512_load_ps(t);
      _mm512_store_ps(t, _mm512_fmadd_ps(part[i][n], _mm512_load_ps(scales + n * kTile), prev));
    }
}

// Activation rows per pass: a pass's rows (about kPassBytes) stay in L2 while every tile group of
// the block converts its scale blocks once for them.
constexpr int64_t kPassBytes = int64_t(384) << 10;
inline int64_t pass_rows(int64_t ld) { return std::clamp<int64_t>(kPassBytes / (2 * ld) / 6 * 6, 6, 192); }

// Chunks a stored weight's tiles convert at a time: whole scale blocks spanning about 1024 columns.
constexpr int64_t kStoredSpan = 32;

// Rows [0, m) of packed (row stride ld) against tiles[n], n < NT, all of one weight shape:
// tot[r * kGroup * kTile + 16n + lane] is row r's output of tile n's lane (ldt kGroup * kTile).
// The tiles' chunks are converted a span at a time (tile-major: one scale block, in L1; stored:
// kStoredSpan), then each scale block runs over every row tile.
template <int NT>
void group_rows(const uint16_t* packed, int64_t ld, int64_t m, const TileRef (&tiles)[NT], float* tot) {
  const LinearWeight& w = *tiles[0].w;
  const int64_t kc = (w.n_in + kChunk - 1) / kChunk, bc = w.block_cols / kChunk;
  const int64_t span = w.tile_major ? bc : std::max<int64_t>(1, kStoredSpan / bc) * bc;
  const Avx512Bf16::Fp8Lut lut(w.dtype);
  thread_local AlignedVector<uint16_t> scratch;
  scratch.resize(size_t(NT * span * kChunkElems));
  alignas(64) float scales[NT * kTile];
  for (int64_t s0 = 0; s0 < kc; s0 += span) {
    const int64_t n_span = std::min(span, kc - s0);
    for (int n = 0; n < NT; ++n) convert_chunks(lut, tiles[n], s0, n_span, scratch.data() + n * n_span * kChunkElems);
    for (int64_t c0 = s0; c0 < s0 + n_span; c0 += bc) {
      const int64_t blk = c0 / bc, n_ch = std::min(bc, s0 + n_span - c0);
      for (int n = 0; n < NT; ++n) _mm512_store_ps(scales + n * kTile, tile_scales(tiles[n], blk));
      const uint16_t* wp = scratch.data() + (c0 - s0) * kChunkElems;
      for_row_tiles(m, [&]<int MR>(int64_t r) __attribute__((always_inline)) {
        block_tile<MR, NT>(packed + r * ld + c0 * kChunk, ld, wp, n_span, n_ch, scales, tot + r * kGroup * kTile,
                           kGroup * kTile, blk == 0);
      });
    }
  }
}

// MR rows (decode) against tiles[n], n < NT (MR * NT <= 16 accumulators): each 64 codes converted
// in registers right before their two pairs' products with every row, every tile streamed from
// memory in order, the MR x NT accumulators interleaved. Tile-major codes are read as they lie;
// kStored tiles' 16 rows are read two chunks at a time in pair order (load_stored_pairs; the tile
// it prefetches is the next group's, in linear_block_packed and swiglu_block_packed) into an L1
// ring, the same codes in the same order. The per-output operations of group_rows, bit for bit.
// Rows x + i * ldx; tot[i * ldt + 16n + lane].
template <int MR, int NT, bool kStored>
__attribute__((noinline)) void stream_rows(const uint16_t* x, int64_t ldx, const TileRef (&tiles)[NT], float* tot,
                                           int64_t ldt) {
  const LinearWeight& w = *tiles[0].w;
  const int64_t kc = (w.n_in + kChunk - 1) / kChunk, bc = w.block_cols / kChunk;
  const Avx512Bf16::Fp8Lut lut(w.dtype);
  const uint8_t* src[NT];  // tile-major: the tile's first chunk; stored: its first row
  int valid[NT];           // stored: the tile's rows before n_out
  alignas(64) uint8_t ring[kStored ? NT : 1][2 * kChunkElems];
#pragma GCC unroll 4
  for (int n = 0; n < NT; ++n) {
    const int64_t t = tiles[n].t;
    src[n] = static_cast<const uint8_t*>(tiles[n].w->data) + t * (kStored ? kTile * w.n_in : kc * kChunkElems);
    valid[n] = int(std::min<int64_t>(kTile, w.n_out - t * kTile));
  }
  __m512 part[MR][NT];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int n = 0; n < NT; ++n) part[i][n] = _mm512_setzero_ps();
  for (int64_t c0 = 0, blk = 0; c0 < kc; c0 += bc, ++blk) {
    for (int64_t c = c0; c < std::min(kc, c0 + bc); ++c) {
      const uint8_t* chunk[NT];
#pragma GCC unroll 4
      for (int n = 0; n < NT; ++n) {
        if constexpr (kStored) {
          if (c % 2 == 0) {
            __m512i a[16];
            load_stored_pairs(src[n], w.n_in, valid[n], c * kChunk, a);
#pragma GCC unroll 16
            for (int j = 0; j < 16; ++j) _mm512_store_si512(ring[n] + 64 * j, a[j]);
          }
          chunk[n] = ring[n] + (c % 2) * kChunkElems;
        } else {
          chunk[n] = src[n] + c * kChunkElems;
        }
      }
#pragma GCC unroll 8
      for (int q = 0; q < 8; ++q) {  // pairs 2q and 2q + 1 of the chunk, broadcast from memory
#pragma GCC unroll 4
        for (int n = 0; n < NT; ++n) {
          const uint8_t* codes = chunk[n] + 64 * q;
          if constexpr (!kStored) _mm_prefetch(reinterpret_cast<const char*>(codes + amx::kTileAhead), _MM_HINT_T0);
          __m512i w0, w1;
          Avx512Bf16::fp8x64_to_bf16(lut, codes, 64, w0, w1);
#pragma GCC unroll 8
          for (int i = 0; i < MR; ++i) {
            const uint16_t* xc = x + i * ldx + c * kChunk + 4 * q;
            const __m512i a0 = _mm512_broadcastd_epi32(_mm_loadu_si32(xc));
            const __m512i a1 = _mm512_broadcastd_epi32(_mm_loadu_si32(xc + 2));
            part[i][n] = _mm512_dpbf16_ps(part[i][n], __m512bh(a0), __m512bh(w0));
            part[i][n] = _mm512_dpbf16_ps(part[i][n], __m512bh(a1), __m512bh(w1));
          }
        }
      }
    }
#pragma GCC unroll 4
    for (int n = 0; n < NT; ++n) {
      const __m512 scale = tile_scales(tiles[n], blk);
#pragma GCC unroll 8
      for (int i = 0; i < MR; ++i) {
        float* t = tot + i * ldt + n * kTile;
        _mm512_store_ps(t, _mm512_fmadd_ps(part[i][n], scale, blk == 0 ? _mm512_setzero_ps() : _mm512_load_ps(t)));
        part[i][n] = _mm512_setzero_ps();
      }
    }
  }
}

// Rows up to kStreamRows against tiles[n], n < NT, by stream_rows: all NT tiles at once up to 4
// rows, else 2 tiles at a time (a pass of the weights is the bound up to 8 rows; the scratch of
// group_rows costs more than that).
constexpr int64_t kStreamRows = 8;
template <int NT>
void stream_group(const uint16_t* x, int64_t ldx, int64_t m, const TileRef (&tiles)[NT], float* tot, int64_t ldt) {
  const bool stored = !tiles[0].w->tile_major;
  const auto run = [&]<int MR, int N>(const TileRef (&ts)[N], float* out) {
    if (stored) stream_rows<MR, N, true>(x, ldx, ts, out, ldt);
    else stream_rows<MR, N, false>(x, ldx, ts, out, ldt);
  };
  const auto rows = [&]<int MR>() {
    if constexpr (MR <= 4 || NT <= 2) {
      run.template operator()<MR, NT>(tiles, tot);
    } else {
      const TileRef first[2] = {tiles[0], tiles[1]};
      run.template operator()<MR, 2>(first, tot);
      TileRef rest[NT - 2];
      for (int n = 2; n < NT; ++n) rest[n - 2] = tiles[n];
      run.template operator()<MR, NT - 2>(rest, tot + 2 * kTile);
    }
  };
  switch (m) {
    case 1: return rows.template operator()<1>();
    case 2: return rows.template operator()<2>();
    case 3: return rows.template operator()<3>();
    case 4: return rows.template operator()<4>();
    case 5: return rows.template operator()<5>();
    case 6: return rows.template operator()<6>();
    case 7: return rows.template operator()<7>();
    default: return rows.template operator()<8>();
  }
}

// Rows [0, m) against tiles[n], n < NT (group_rows; up to kStreamRows rows stream_group), then
// epilogue(r, tot + r * kGroup * kTile) per row: tot holds kGroup * kTile floats per row (a
// per-thread buffer).
template <int NT, class Epilogue>
void run_group(const uint16_t* packed, int64_t m, const TileRef (&tiles)[NT], Epilogue&& epilogue) {
  constexpr int64_t ldt = kGroup * kTile;
  const int64_t ld = row_elems(tiles[0].w->n_in);
  thread_local AlignedVector<float> tot;
  if (m <= kStreamRows) {
    tot.resize(size_t(m * ldt));
    stream_group<NT>(packed, ld, m, tiles, tot.data(), ldt);
    for (int64_t r = 0; r < m; ++r) epilogue(r, static_cast<const float*>(tot.data() + r * ldt));
    return;
  }
  const int64_t per_pass = std::min(m, pass_rows(ld));
  tot.resize(size_t(per_pass * ldt));
  for (int64_t r0 = 0; r0 < m; r0 += per_pass) {
    const int64_t mr = std::min(per_pass, m - r0);
    group_rows<NT>(packed + r0 * ld, ld, mr, tiles, tot.data());
    for (int64_t r = 0; r < mr; ++r) epilogue(r0 + r, static_cast<const float*>(tot.data() + r * ldt));
  }
}

// f(std::integral_constant<int, n>) for n in 1..kGroup.
template <class F>
void with_tiles(int n, F&& f) {
  switch (n) {
    case 1: return f(std::integral_constant<int, 1>());
    case 2: return f(std::integral_constant<int, 2>());
    case 3: return f(std::integral_constant<int, 3>());
    default: return f(std::integral_constant<int, 4>());
  }
}

// Stores a tile's 16 outputs (out) as outputs [o, min(o + 16, o_end)) of y's row.
inline void store_tile(const float* out, int64_t o, int64_t o_end, float* y_row) {
  const int64_t valid = std::min<int64_t>(kTile, o_end - o);
  _mm512_mask_storeu_ps(y_row + o, __mmask16(valid == kTile ? 0xffffu : (1u << valid) - 1u), _mm512_load_ps(out));
}

// linear_block_packed (kernel_table.h; o_begin a multiple of 16): output tiles in groups of 4, group
// g taking tiles g + j * quarter (j < 4): each of its 4 weight streams walks a contiguous quarter of
// the block from group to group, which the hardware prefetchers follow (tile-major tiles lie one
// after another).
inline void linear_block_packed(const uint16_t* packed, int64_t m, const LinearWeight& w, int64_t o_begin,
                                int64_t o_end, float* y, int64_t ldy) {
  const int64_t n_tiles = (o_end - o_begin + kTile - 1) / kTile, quarter = (n_tiles + kGroup - 1) / kGroup;
  const int64_t t0 = o_begin / kTile;
  for (int64_t g = 0; g < quarter; ++g) {
    const int nt = int(std::min<int64_t>(kGroup, (n_tiles - g + quarter - 1) / quarter));  // g + j * quarter < n_tiles
    with_tiles(nt, [&](auto n_const) {
      constexpr int NT = decltype(n_const)::value;
      TileRef tiles[NT];
      for (int n = 0; n < NT; ++n) tiles[n] = {&w, t0 + g + n * quarter};
      run_group<NT>(packed, m, tiles, [&](int64_t r, const float* out) {
        for (int n = 0; n < NT; ++n)
          store_tile(out + n * kTile, tiles[n].t * kTile - o_begin, o_end - o_begin, y + r * ldy);
      });
    });
  }
}

// swiglu_block_packed (kernel_table.h; o_begin a multiple of 16): output tiles g and g + half
// (streams walking the two halves of the block in gate and in up, as linear_block_packed's quarters),
// each gate tile with the up tile of the same outputs; y = silu(g) * u (vexp.h's silu_mul_n, 16
// outputs at a time).
inline void swiglu_block_packed(const uint16_t* packed, int64_t m, const LinearWeight& gate, const LinearWeight& up,
                                int64_t o_begin, int64_t o_end, float* y, int64_t ldy) {
  const int64_t n_tiles = (o_end - o_begin + kTile - 1) / kTile, half = (n_tiles + 1) / 2;
  const int64_t t0 = o_begin / kTile;
  for (int64_t g = 0; g < half; ++g) {
    const int nt = g + half < n_tiles ? 2 : 1;  // output tiles of the group
    with_tiles(2 * nt, [&](auto n_const) {
      constexpr int NT = decltype(n_const)::value;
      if constexpr (NT % 2 == 0) {
        TileRef tiles[NT];
        for (int n = 0; n < NT / 2; ++n) {
          tiles[n] = {&gate, t0 + g + n * half};
          tiles[NT / 2 + n] = {&up, t0 + g + n * half};
        }
        run_group<NT>(packed, m, tiles, [&](int64_t r, const float* out) {
          for (int n = 0; n < NT / 2; ++n) {
            const int64_t o = tiles[n].t * kTile - o_begin, n_valid = std::min<int64_t>(kTile, o_end - o_begin - o);
            silu_mul_n<Avx512Bf16>(out + n * kTile, out + (NT / 2 + n) * kTile, n_valid, y + r * ldy + o);
          }
        });
      }
    });
  }
}

}  // namespace deepinfer::cpu::pair_tiles
