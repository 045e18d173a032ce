// Absorbed MLA attention with bf16 scores over a bf16 cache, the parts that VDPBF16PS and AVX-512
// permutes make cheaper: AbsorbedPairs<Avx512Bf16> (see mla_attention_kernels.h). Included only
// by kernels_avx512bf16.cpp (the amx level uses that level's attention).
//
// tile_scores: the 16 score accumulators of a 4 heads x 4 keys tile are reduced together by a
// fixed tree of lane permutes instead of a horizontal sum per score: each of 4 levels adds lanes
// 2l and 2l + 1 of pairs of vectors (15 such steps in all), after which lane 4i + j holds score
// (i, j). A score's lanes are summed in the same order whatever the tile's other members.
// pack_pairs: a block's cached latents as key pairs [kAttendKeyBlock / 2][c][2] (keys 2u and
// 2u + 1 of pair u interleaved per column; keys past n_t are zero), read by
// ExpandedPairValues<Avx512Bf16>::accumulate.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/mla_attention_kernels.h"
#include "kernels/cpu/mla_expanded_pair_values.h"
#include "kernels/cpu/simd_avx512_bf16.h"

namespace deepinfer::cpu {
namespace {

template <>
struct AbsorbedPairs<Avx512Bf16> {
  static constexpr bool kEnabled = true;

  // sc[i][j] = scale * (sum of the lanes of acc[i][j]).
  static void tile_scores(const __m512 (&acc)[4][4], float scale, float (&sc)[4][4]) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    // Lanes [0, 8) of combine(a, b) add a's lane pairs, lanes [8, 16) b's.
    auto combine = [&](__m512 a, __m512 b) {
      return _mm512_add_ps(_mm512_permutex2var_ps(a, even, b), _mm512_permutex2var_ps(a, odd, b));
    };
    __m512 x[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) x[k] = combine(acc[k / 2][(2 * k) % 4], acc[k / 2][(2 * k) % 4 + 1]);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) x[k] = combine(x[2 * k], x[2 * k + 1]);
#pragma GCC unroll 2
    for (int k = 0; k < 2; ++k) x[k] = combine(x[2 * k], x[2 * k + 1]);
    _mm512_storeu_ps(&sc[0][0], _mm512_mul_ps(combine(x[0], x[1]), _mm512_set1_ps(scale)));
  }

  // pairs[u][col][k] = latent col of key t0 + 2u + k as cached (0 past n_t), u < kAttendKeyBlock / 2.
  // Also prefetches the next block's entries (positions < n_keys) into L2: the block's scores and
  // value sums then hide their reads from memory.
  static void pack_pairs(const MlaAttentionParams& p, const BatchSequence& s, int32_t t0, int n_t, int32_t n_keys,
                         uint16_t* pairs) {
    const int c = p.layout.kv_lora_rank;
    const size_t entry_bytes = p.layout.bytes_per_token();
    const int32_t next_end = std::min<int32_t>(n_keys, t0 + 2 * kAttendKeyBlock);
    alignas(64) static constexpr uint16_t kInterleave[32] = {0,  32, 1,  33, 2,  34, 3,  35, 4,  36, 5,
                                                             37, 6,  38, 7,  39, 8,  40, 9,  41, 10, 42,
                                                             11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    const __m512i lo = _mm512_load_si512(kInterleave);
    const __m512i hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
    for (int u = 0; u < kAttendKeyBlock / 2; ++u) {
      const int t = 2 * u;
      const uint16_t* e0 = t < n_t ? reinterpret_cast<const uint16_t*>(cache_entry(p, s, t0 + t)) : nullptr;
      const uint16_t* e1 = t + 1 < n_t ? reinterpret_cast<const uint16_t*>(cache_entry(p, s, t0 + t + 1)) : nullptr;
      for (int32_t t_next = t0 + kAttendKeyBlock + t; t_next < std::min(next_end, t0 + kAttendKeyBlock + t + 2); ++t_next) {
        const char* e = reinterpret_cast<const char*>(cache_entry(p, s, t_next));
        for (size_t b = 0; b < entry_bytes; b += 64) _mm_prefetch(e + b, _MM_HINT_T1);
      }
      uint16_t* dst = pairs + size_t(u) * c * 2;
      for (int cb = 0; cb < c; cb += 32) {
        const int n = std::min(32, c - cb);
        const __mmask32 mk = __mmask32((uint64_t(1) << n) - 1);
        const __m512i a = e0 ? _mm512_maskz_loadu_epi16(mk, e0 + cb) : _mm512_setzero_si512();
        const __m512i b = e1 ? _mm512_maskz_loadu_epi16(mk, e1 + cb) : _mm512_setzero_si512();
        const int n0 = std::min(n, 16), n1 = n - n0;
        _mm512_mask_storeu_epi16(dst + 2 * cb, __mmask32((uint64_t(1) << (2 * n0)) - 1),
                                 _mm512_permutex2var_epi16(a, lo, b));
        if (n1 > 0)
          _mm512_mask_storeu_epi16(dst + 2 * cb + 32, __mmask32((uint64_t(1) << (2 * n1)) - 1),
                                   _mm512_permutex2var_epi16(a, hi, b));
      }
    }
  }

  // o[i][0, c) = o[i] * alpha[i] + sum over the block's pairs of the bf16 weights p[i] times the
  // pairs (ExpandedPairValues<Avx512Bf16>::accumulate), rows < n_hb stored.
  static void accumulate(const uint16_t* const* w, const uint16_t* pairs, int c, float* const* o, const float* alpha,
                         int n_hb) {
    ExpandedPairValues<Avx512Bf16>::accumulate(w, pairs, int64_t(c) * 2, c, o, alpha, n_hb);
  }
};

}  // namespace
}  // namespace deepinfer::cpu
