// Absorbed MLA attention for one batch row over its sequence's paged cache, written once over a
// SIMD traits type V (simd_*.h) and instantiated per ISA by kernels_<isa>.cpp.
//
// Keys are read in blocks of kAttendKeyBlock positions at fixed absolute offsets, widened to f32
// once (or, for bf16 pair value sums, interleaved) and shared by all of the task's heads; the next
// block is prefetched while one is computed. Per head: scores of the block, an online-softmax
// update (running max and sum), and out = out * alpha + sum_t p[t] * latent[t]. The order of
// every reduction depends only on the row's own position, never on the batch or head grouping.
// With dot_dtype BF16 (bf16 cache), the scores multiply the row's bf16-rounded queries with
// the cached bf16 keys as stored: VDPBF16PS where V has it, else both widened to f32; the
// weights are rounded to bf16 before the value sum (exact products with the widened latents).
// An fp8 cache with dot_dtype BF16 is read as the bf16 cache that holds each entry's latent
// dequantized and rounded to bf16 (bf16 of the f32 product code * scale, nearest even), bit for
// bit. Where V has bf16 pair dots (Bf16PairDots), the value sums with dot_dtype BF16 are pairs too:
// the block's latents interleaved two positions at a time ([n_t / 2][latent][2], an odd block's
// last pair padded with zeros) and read by VDPBF16PS with the weights' pairs, never widened to f32.
// The amx level runs BF16 on tiles instead (mla_attention_amx.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "kernels/cpu/bf16_pair_dots.h"
#include "kernels/cpu/gemm_kernels.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/vexp.h"
#include "kernels/ops.h"

namespace deepinfer::cpu {
namespace {

// dst[0, n) = f32 of bf16 src[0, n).
template <class V>
void widen_bf16(const uint16_t* src, int n, float* dst) {
  int i = 0;
  for (; i + V::kW <= n; i += V::kW) V::store(dst + i, V::from_bf16(src + i));
  if (i < n) V::store_n(dst + i, V::from_bf16_n(src + i, n - i), n - i);
}

// The cache entry of position pos: [latent | k_pe] in the layout's dtype.
inline const uint8_t* cache_entry(const MlaAttentionParams& p, const BatchSequence& s, int32_t pos) {
  return p.cache +
         (size_t(s.block_tables[size_t(p.kind)][pos / p.block_size]) * size_t(p.block_size) + size_t(pos % p.block_size)) *
             p.layout.bytes_per_token();
}

// Asks for the cache entries of positions [t0, t0 + n) (none when n <= 0) to be brought into the
// cache: the next key block's, while this block's arithmetic runs, so that a block is not read
// from memory on demand.
inline void prefetch_keys(const MlaAttentionParams& p, const BatchSequence& s, int32_t t0, int n) {
  const size_t bytes = p.layout.bytes_per_token();
  for (int t = 0; t < n; ++t) {
    const uint8_t* e = cache_entry(p, s, t0 + t);
    for (size_t b = 0; b < bytes; b += 64) __builtin_prefetch(e + b, 0, 2);
    __builtin_prefetch(e + bytes - 1, 0, 2);
  }
}

// keys[t] = [latent | k_pe] of positions [t0, t0 + n_t) as f32.
template <class V>
void load_key_block(const MlaAttentionParams& p, const BatchSequence& s, int32_t t0, int n_t, float* keys) {
  const int c = p.layout.kv_lora_rank, rd = p.layout.qk_rope_head_dim, dk = c + rd;
  for (int t = 0; t < n_t; ++t) {
    const uint8_t* entry = cache_entry(p, s, t0 + t);
    float* dst = keys + size_t(t) * dk;
    switch (p.layout.dtype) {
      case DType::F32:
        std::memcpy(dst, entry, size_t(dk) * 4);
        break;
      case DType::BF16:
        widen_bf16<V>(reinterpret_cast<const uint16_t*>(entry), dk, dst);
        break;
      default: {  // F8_E4M3: groups of e4m3 with f32 scales, then the bf16 rope part
        const int group = MlaCacheLayout::kFp8GroupSize, n_groups = (c + group - 1) / group;
        const float* scales = reinterpret_cast<const float*>(entry + c);
        for (int g = 0; g < n_groups; ++g) {
          const typename V::F sc = V::bcast(scales[g] * 256.0f);
          const int end = std::min(c, (g + 1) * group);
          int i = g * group;
          for (; i + V::kW <= end; i += V::kW) V::store(dst + i, V::mul(V::from_fp8(entry + i), sc));
          if (i < end) V::store_n(dst + i, V::mul(V::from_fp8_n(entry + i, end - i), sc), end - i);
        }
        widen_bf16<V>(reinterpret_cast<const uint16_t*>(entry + c + n_groups * 4), rd, dst + c);
      }
    }
  }
}

// acc[i][j] += a[i][0, n) * b[j][0, n), lane-wise.
template <class V, int MR, int NR>
inline void accumulate_dots(const float* const* a, const float* const* b, int n, typename V::F (&acc)[MR][NR]) {
  int k = 0;
  for (; k + V::kW <= n; k += V::kW) {
    typename V::F bv[NR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) bv[j] = V::pin(V::load(b[j] + k));
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const typename V::F av = V::pin(V::load(a[i] + k));
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) acc[i][j] = V::fma(av, bv[j], acc[i][j]);
    }
  }
  if (k < n) {
    typename V::F bv[NR];
#pragma GCC unroll 4
    for (int j = 0; j < NR; ++j) bv[j] = V::load_n(b[j] + k, n - k);
#pragma GCC unroll 4
    for (int i = 0; i < MR; ++i) {
      const typename V::F av = V::load_n(a[i] + k, n - k);
#pragma GCC unroll 4
      for (int j = 0; j < NR; ++j) acc[i][j] = V::fma(av, bv[j], acc[i][j]);
    }
  }
}

// As accumulate_dots for bf16 inputs.
template <class V, int MR, int NR>
inline void accumulate_dots(const uint16_t* const* a, const uint16_t* const* b, int n, typename V::F (&acc)[MR][NR]) {
  if constexpr (requires { V::kBf16Dot; }) {
    V::template bf16_dot_accumulate<MR, NR>(a, b, n, acc);
  } else {
    int k = 0;
    for (; k < n; k += V::kW) {
      const int w = std::min(V::kW, n - k);
      typename V::F bv[NR];
      for (int j = 0; j < NR; ++j) bv[j] = w == V::kW ? V::from_bf16(b[j] + k) : V::from_bf16_n(b[j] + k, w);
      for (int i = 0; i < MR; ++i) {
        const typename V::F av = w == V::kW ? V::from_bf16(a[i] + k) : V::from_bf16_n(a[i] + k, w);
        for (int j = 0; j < NR; ++j) acc[i][j] = V::fma(av, bv[j], acc[i][j]);
      }
    }
  }
}

// Latent columns per value tile: 4 vectors.
template <class V>
constexpr int kValueCols = 4 * V::kW;

// One key block's online-softmax step for one head: sc[0, n_t) holds the block's scores and becomes
// exp(score - m_new), where m_new = max(m_run, the block's max); m_run becomes m_new, s_run the
// running sum rescaled plus the block's sum. Returns alpha = exp(m_old - m_new), the factor the
// head's value accumulator must be rescaled by. A fixed order of operations per head and block,
// shared by the absorbed and the expanded attention.
template <class V>
inline float softmax_block_update(float* sc, int n_t, float& m_run, float& s_run) {
  using F = typename V::F;
  F mx = V::bcast(-INFINITY);
  int t = 0;
  for (; t + V::kW <= n_t; t += V::kW) mx = V::max(mx, V::load(sc + t));
  float m_blk = V::hmax(mx);
  for (; t < n_t; ++t) m_blk = std::max(m_blk, sc[t]);
  const float m_new = std::max(m_run, m_blk);
  const float alpha = std::exp(m_run - m_new);
  m_run = m_new;
  s_run = s_run * alpha + V::hsum(exp_shifted_n<V>(sc, n_t, m_new));
  return alpha;
}

// sc[0, n) rounded to bf16 in place: the softmax weights that bf16 value sums take.
inline void round_weights_to_bf16(float* sc, int n) {
  for (int t = 0; t < n; ++t) sc[t] = bf16_to_f32(f32_to_bf16(sc[t]));
}

// For 4 heads i (short groups repeat the last; only the first n_hb are stored) and latent
// columns [cb, cb + n_valid): o[i] = o[i] * alpha[i] + sum_t p[i][t] * keys[t][latent].
template <class V, bool kFull>
inline void accumulate_values(const float* keys, int dk, int n_t, int cb, int n_valid, const float* const* p,
                              float* const* o, const typename V::F* alpha, int n_hb) {
  using F = typename V::F;
  constexpr int NC = 4;
  int n[NC];
#pragma GCC unroll 4
  for (int j = 0; j < NC; ++j) n[j] = std::clamp(n_valid - j * V::kW, 0, V::kW);
  auto load = [&](const float* src, int j) { return kFull ? V::load(src) : V::load_n(src, n[j]); };
  F acc[4][NC];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NC; ++j) acc[i][j] = V::mul(load(o[i] + cb + j * V::kW, j), alpha[i]);
  for (int t = 0; t < n_t; ++t) {
    const float* lat = keys + size_t(t) * dk + cb;
    F lv[NC];
#pragma GCC unroll 4
    for (int j = 0; j < NC; ++j) lv[j] = V::pin(load(lat + j * V::kW, j));
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const F pv = V::bcast(p[i][t]);
#pragma GCC unroll 4
      for (int j = 0; j < NC; ++j) acc[i][j] = V::fma(pv, lv[j], acc[i][j]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < NC; ++j) {
      if (i >= n_hb) continue;
      if (kFull) V::store(o[i] + cb + j * V::kW, acc[i][j]);
      else if (n[j] > 0) V::store_n(o[i] + cb + j * V::kW, acc[i][j], n[j]);
    }
}

template <class V>
void mla_attend_row(const MlaAttentionParams& p, const BatchSequence& s, int64_t row, int h0, int h1,
                    AttendScratch& ws) {
  using F = typename V::F;
  constexpr int T = kAttendKeyBlock;
  const int c = p.layout.kv_lora_rank, rd = p.layout.qk_rope_head_dim, dk = c + rd;
  const int n_h = h1 - h0;
  const int32_t n_keys = p.batch->positions[size_t(row)] + 1;  // causal: positions [0, own]
  ws.keys.resize(size_t(T) * size_t(dk));
  ws.scores.resize(size_t(n_h) * T);
  ws.run_max.assign(size_t(n_h), -INFINITY);
  ws.run_sum.assign(size_t(n_h), 0.0f);
  float alpha[4];

  auto q_lat = [&](int h) { return p.q_latent + (row * p.n_heads + h0 + h) * c; };
  auto q_pe = [&](int h) { return p.q_pe + row * p.ld_q_pe_row + (h0 + h) * p.ld_q_pe_head; };
  auto out = [&](int h) { return p.out_latent + (row * p.n_heads + h0 + h) * c; };
  for (int h = 0; h < n_h; ++h) std::fill_n(out(h), c, 0.0f);
  const bool bf16_dots = p.dot_dtype == DType::BF16;
  const bool bf16_keys = bf16_dots && p.layout.dtype == DType::F8_E4M3;
  if (bf16_keys) ws.keys_bf16.resize(size_t(T) * size_t(dk));
  if (bf16_dots) {  // [q_latent | q_pe] of each head, rounded to bf16
    ws.q_bf16.resize(size_t(n_h) * size_t(dk));
    for (int h = 0; h < n_h; ++h) {
      round_to_bf16<V>(q_lat(h), ws.q_bf16.data() + size_t(h) * dk, c);
      round_to_bf16<V>(q_pe(h), ws.q_bf16.data() + size_t(h) * dk + c, rd);
    }
  }

  const bool pair_values = Bf16PairDots<V>::kEnabled && bf16_dots;
  if (pair_values) ws.value_pairs.resize(size_t(T) * size_t(c));
  // Key t of the block as bf16: the cache entry itself, or the fp8 entry rounded.
  auto key_bf16 = [&](int32_t t0, int t) {
    return bf16_keys ? ws.keys_bf16.data() + size_t(t) * dk
                     : reinterpret_cast<const uint16_t*>(cache_entry(p, s, t0 + t));
  };

  for (int32_t t0 = 0; t0 < n_keys; t0 += T) {
    const int n_t = std::min<int32_t>(T, n_keys - t0), n_pairs = (n_t + 1) / 2;
    if (bf16_keys) {  // an fp8 cache's entries as bf16, for the scores and the values, a key at a time
      for (int t = 0; t < n_t; ++t) {
        float* key = ws.keys.data() + (pair_values ? 0 : size_t(t) * dk);
        load_key_block<V>(p, s, t0 + t, 1, key);
        round_to_bf16<V>(key, ws.keys_bf16.data() + size_t(t) * dk, dk);
        if (!pair_values) widen_bf16<V>(ws.keys_bf16.data() + size_t(t) * dk, dk, key);
      }
    } else if (!pair_values) {
      load_key_block<V>(p, s, t0, n_t, ws.keys.data());
    }
    if constexpr (Bf16PairDots<V>::kEnabled) {
      if (pair_values)
        for (int u = 0; u < n_pairs; ++u)
          Bf16PairDots<V>::interleave(key_bf16(t0, 2 * u), 2 * u + 1 < n_t ? key_bf16(t0, 2 * u + 1) : nullptr, c,
                                      ws.value_pairs.data() + size_t(u) * 2 * c);
    }
    const float* keys = ws.keys.data();

    // Scores: tiles of 4 heads x 4 keys (short tiles repeat their last member).
    for (int hb = 0; hb < n_h; hb += 4) {
      const float* ql[4];
      const float* qp[4];
      for (int i = 0; i < 4; ++i) {
        const int h = std::min(hb + i, n_h - 1);
        ql[i] = q_lat(h);
        qp[i] = q_pe(h);
      }
      for (int tb = 0; tb < n_t; tb += 4) {
        if (hb == 0) prefetch_keys(p, s, t0 + T + tb, std::min<int32_t>(4, n_keys - (t0 + T + tb)));
        const float* kl[4];
        const float* kp[4];
        for (int j = 0; j < 4; ++j) {
          kl[j] = keys + size_t(std::min(tb + j, n_t - 1)) * dk;
          kp[j] = kl[j] + c;
        }
        F acc[4][4];
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
          for (int j = 0; j < 4; ++j) acc[i][j] = V::zero();
        if (bf16_dots) {  // one run over [latent | k_pe] as stored in the bf16 cache (or as rounded from fp8)
          const uint16_t* qb[4];
          const uint16_t* kb[4];
          for (int i = 0; i < 4; ++i) qb[i] = ws.q_bf16.data() + size_t(std::min(hb + i, n_h - 1)) * dk;
          for (int j = 0; j < 4; ++j)
            kb[j] = key_bf16(t0, std::min(tb + j, n_t - 1));
          accumulate_dots<V, 4, 4>(qb, kb, dk, acc);
        } else {
          accumulate_dots<V, 4, 4>(ql, kl, c, acc);
          accumulate_dots<V, 4, 4>(qp, kp, rd, acc);
        }
        alignas(64) float sc[4][4];
        if constexpr (requires { V::hsum_4x4(acc); }) {
          V::store(&sc[0][0], V::mul(V::hsum_4x4(acc), V::bcast(p.softmax_scale)));
        } else {
#pragma GCC unroll 4
          for (int i = 0; i < 4; ++i)
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) sc[i][j] = V::hsum(acc[i][j]) * p.softmax_scale;
        }
        for (int i = 0; i < 4 && hb + i < n_h; ++i)
          for (int j = 0; j < 4 && tb + j < n_t; ++j) ws.scores[size_t(hb + i) * T + size_t(tb + j)] = sc[i][j];
      }
    }

    // Softmax update and values, 4 heads at a time.
    for (int hb = 0; hb < n_h; hb += 4) {
      const int n_hb = std::min(4, n_h - hb);
      for (int i = 0; i < n_hb; ++i) {
        float* sc = ws.scores.data() + size_t(hb + i) * T;
        alpha[i] = softmax_block_update<V>(sc, n_t, ws.run_max[size_t(hb + i)], ws.run_sum[size_t(hb + i)]);
        if (bf16_dots && !pair_values) round_weights_to_bf16(sc, n_t);
      }
      if constexpr (Bf16PairDots<V>::kEnabled) {
        if (pair_values) {  // the weights as bf16 pairs, an odd block's last pair padded with 0
          alignas(64) uint16_t pb[4][T];
          const uint16_t* pr[4];
          float* o[4];
          float al[4];
          for (int i = 0; i < 4; ++i) {
            const int ic = std::min(i, n_hb - 1);
            if (i < n_hb) {
              round_to_bf16<V>(ws.scores.data() + size_t(hb + i) * T, pb[i], n_t);
              if (n_t % 2 == 1) pb[i][n_t] = 0;
            }
            pr[i] = pb[ic];
            o[i] = out(hb + ic);
            al[i] = alpha[ic];
          }
          Bf16PairDots<V>::accumulate(pr, ws.value_pairs.data(), int64_t(2) * c, c, n_pairs, o, al, n_hb);
          continue;
        }
      }
      const float* pr[4];
      float* o[4];
      F al[4];
      for (int i = 0; i < 4; ++i) {
        const int h = hb + std::min(i, n_hb - 1);
        pr[i] = ws.scores.data() + size_t(h) * T;
        o[i] = out(h);
        al[i] = V::bcast(alpha[std::min(i, n_hb - 1)]);
      }
      for (int cb = 0; cb < c; cb += kValueCols<V>) {
        if (c - cb >= kValueCols<V>)
          accumulate_values<V, true>(keys, dk, n_t, cb, kValueCols<V>, pr, o, al, n_hb);
        else
          accumulate_values<V, false>(keys, dk, n_t, cb, c - cb, pr, o, al, n_hb);
      }
    }
  }
  for (int h = 0; h < n_h; ++h) {
    const F inv = V::bcast(1.0f / ws.run_sum[size_t(h)]);
    float* o = out(h);
    int i = 0;
    for (; i + V::kW <= c; i += V::kW) V::store(o + i, V::mul(V::load(o + i), inv));
    if (i < c) V::store_n(o + i, V::mul(V::load_n(o + i, c - i), inv), c - i);
  }
}

}  // namespace
}  // namespace deepinfer::cpu
