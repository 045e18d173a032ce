// The per-ISA kernel entry points (kernels_<isa>.cpp), chosen at run time by isa.h. Drivers
// (gemm.cpp, mla_attention.cpp) split work across threads and call these on blocks; each
// block computes every output element with a fixed reduction order that depends only on the
// element's own inputs, so any blocking or thread count gives bitwise identical results.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/mla_expanded_chunk.h"
#include "kernels/ops.h"

namespace deepinfer::cpu {

// Per-thread buffers of the attention kernel, grown on demand and reused.
struct AttendScratch {
  std::vector<float> keys;    // [kAttendKeyBlock, kv_lora_rank + qk_rope_head_dim], f32
  std::vector<float> scores;  // [heads, kAttendKeyBlock]
  std::vector<float> run_max, run_sum;  // [heads]
  std::vector<uint16_t> q_bf16;         // [heads, kv_lora_rank + qk_rope_head_dim], bf16 scores only
  std::vector<uint16_t> keys_bf16;      // [kAttendKeyBlock, kv_lora_rank + qk_rope_head_dim], bf16 scores on an fp8 cache
  std::vector<uint16_t> value_pairs;    // [kAttendKeyBlock / 2, kv_lora_rank, 2], bf16 pair value sums
};

// Keys are processed in blocks at fixed absolute positions [i * kAttendKeyBlock, ...), with an
// online softmax across blocks; the blocking is part of each row's reduction order.
constexpr int kAttendKeyBlock = 64;

struct KernelTable {
  // y[r * ldy + (o - o_begin)] = dot(x_rows[r][0, n_in), W[o]) for r < m, o in [o_begin, o_end).
  void (*linear_block)(const float* const* x_rows, int64_t m, const LinearWeight& w, int64_t o_begin, int64_t o_end,
                       float* y, int64_t ldy);
  // y[r * ldy + (o - o_begin)] = silu(x . gate[o]) * (x . up[o]) for r < m, o in [o_begin, o_end).
  void (*swiglu_block)(const float* const* x_rows, int64_t m, const LinearWeight& gate, const LinearWeight& up,
                       int64_t o_begin, int64_t o_end, float* y, int64_t ldy);
  // y[r * ldy + (c - c_begin)] = sum_{d < n_d} x_rows[r][d] * W[row0 + d][c] for r < m,
  // c in [c_begin, c_end); c_begin a multiple of 64.
  void (*outer_block)(const float* const* x_rows, int64_t m, int64_t n_d, const LinearWeight& w, int64_t row0,
                      int64_t c_begin, int64_t c_end, float* y, int64_t ldy);
  // As linear_block / swiglu_block with bf16 activation rows (see round_to_bf16), against bf16
  // weights and fp8 weights whose block_cols is a multiple of 32 (admits_bf16_activations).
  void (*linear_block_bf16x)(const uint16_t* const* x_rows, int64_t m, const LinearWeight& w, int64_t o_begin,
                             int64_t o_end, float* y, int64_t ldy);
  void (*swiglu_block_bf16x)(const uint16_t* const* x_rows, int64_t m, const LinearWeight& gate,
                             const LinearWeight& up, int64_t o_begin, int64_t o_end, float* y, int64_t ldy);
  // y[i] = x[i] rounded to bf16 (nearest even), i < n.
  void (*round_to_bf16)(const float* x, uint16_t* y, int64_t n);
  // Attention of batch row `row` (of sequence s) for heads [h0, h1) (see MlaAttentionParams).
  void (*mla_attend_row)(const MlaAttentionParams& p, const BatchSequence& s, int64_t row, int h0, int h1,
                         AttendScratch& scratch);
  // Expanded attention of a sequence's rows over one chunk of its positions (see ExpandedChunk):
  // packs the chunk's keys and values, then updates every row's state (on the OpenMP threads).
  void (*mla_expanded_attend_chunk)(const ExpandedChunk& chunk);
  // s[t] = e^(s[t] * scale - mx) / (e^(sink - mx) + sum_u e^(s[u] * scale - mx)) for t < n, where
  // mx = max(sink, max_t s[t] * scale): a sink attention head's weights (SinkAttentionParams).
  void (*sink_softmax)(float* s, int64_t n, float sink, float scale);
  // p.scores[e] for keys e in [e_begin, e_end) (IndexerScoresParams; indexer_scores_kernels.h).
  void (*indexer_score_block)(const IndexerScoresParams& p, int64_t e_begin, int64_t e_end);
  // Packed blocks, on levels that pack a call's bf16 activation rows once for all its blocks
  // (nullptr / false elsewhere): amx runs bf16, fp8 (block_cols a multiple of 32, block_rows of 16)
  // and FP4 weights on tiles, every m alike (simd_amx.h; o_begin a multiple of 16); avx512bf16 runs
  // fp8 and int8 weights on 16-row tiles, one output per lane, every m alike
  // (pair_tiles_avx512_bf16.h; o_begin a multiple of 16); avx512bf16-fma runs bf16 and fp8 weights
  // on rows split into f32 even/odd steps (gemm_kernels.h's split packing), bitwise what its bf16x
  // blocks give. packs(w): whether the packed blocks take w.
  // packed_elems(m, n_in): uint16_t elements of m packed rows; rows [16t, 16t + 16) start at
  // t * packed_elems(16, n_in), so groups of 16 rows may be packed separately. pack_bf16x rounds
  // rows x_rows[r][0, n_in), r < m, to bf16 and packs them; the blocks then read them as
  // linear_block_bf16x / swiglu_block_bf16x read row pointers. amx's layout: token tiles of 16
  // rows, each ceil(n_in / 32) blocks [16 pairs, 16 rows, 2] (pair p of row j: elements 32c + 2p,
  // +1), zero past m and n_in; avx512bf16's: bf16 rows of whole 32-element chunks, zero past n_in.
  // packs_tiles: the packed blocks run on 16-row weight tiles, which the level reads fastest relaid
  // tile-major (gemm.h's relay_weight; packed_column_block sizes their blocks).
  bool (*packs)(const LinearWeight& w) = nullptr;
  int64_t (*packed_elems)(int64_t m, int64_t n_in) = nullptr;
  void (*pack_bf16x)(const float* const* x_rows, int64_t m, int64_t n_in, uint16_t* packed) = nullptr;
  void (*linear_block_packed)(const uint16_t* packed, int64_t m, const LinearWeight& w, int64_t o_begin,
                              int64_t o_end, float* y, int64_t ldy) = nullptr;
  void (*swiglu_block_packed)(const uint16_t* packed, int64_t m, const LinearWeight& gate, const LinearWeight& up,
                              int64_t o_begin, int64_t o_end, float* y, int64_t ldy) = nullptr;
  bool packs_tiles = false;
  // relays_bf16: with packs_tiles, bf16 weights are relaid tile-major too (amx: its tiles read each
  // 1 KiB block where it lies, where the stored rows were 16 rows n_in * 2 bytes apart).
  bool relays_bf16 = false;
  // On tiles, the output columns of a packed block are a multiple of this (amx: pairs of 16-row tiles).
  int packed_block_align = 32;
  // Where a call's packed activations outgrow one pass of token tiles (more than packed_pass_bytes:
  // they then stream past every block from beyond L2), a packed block's weight panels take up to
  // about packed_panel_bytes of L2 (work_split.h's column_block budget), so that fewer blocks each
  // read them; otherwise column_block's default, which leaves more blocks for the balance.
  int64_t packed_panel_bytes = 256 << 10;
  int64_t packed_pass_bytes = INT64_MAX;
  // Heads per mla_attend_row task with bf16 dots are a multiple of this (or all of a row's heads):
  // amx runs them 16 to a tile.
  int attend_head_tile = 1;
  // Sink attention with bf16 dots (SinkAttentionParams' BF16) for heads [h0, h1), over the keys
  // already rounded: bf16 rows [ceil(n_keys / 16) * 16][ld_keys], zero past n_keys and dim, ld_keys
  // a multiple of 32. nullptr where the level has none (sink_attention.cpp then runs its f32 steps on
  // the rounded inputs); amx runs it on tiles (sink_attention_amx.h).
  void (*sink_attend_bf16)(const SinkAttentionParams& p, const uint16_t* keys, int64_t ld_keys, int h0,
                           int h1) = nullptr;
};

constexpr int64_t kAmxChunk = 32;        // k per tile step
constexpr int64_t kAmxBlockElems = 512;  // bf16 elements of one packed [16 pairs, 16 rows, 2] block
inline int64_t amx_packed_elems(int64_t m, int64_t n_in) {
  return (m + 15) / 16 * ((n_in + kAmxChunk - 1) / kAmxChunk) * kAmxBlockElems;
}

extern const KernelTable kPortableKernels;
extern const KernelTable kAvx2Kernels;
extern const KernelTable kAvx512Kernels;
extern const KernelTable kAvx512Bf16Kernels;
extern const KernelTable kAvx512Bf16FmaKernels;
const KernelTable& amx_kernels();  // kAvx512Bf16FmaKernels plus the packed AMX blocks

inline const KernelTable& kernels() {
  switch (active_isa()) {
    case Isa::kAmx: return amx_kernels();
    case Isa::kAvx512Bf16Fma: return kAvx512Bf16FmaKernels;
    case Isa::kAvx512Bf16: return kAvx512Bf16Kernels;
    case Isa::kAvx512: return kAvx512Kernels;
    case Isa::kAvx2: return kAvx2Kernels;
    default: return kPortableKernels;
  }
}

}  // namespace deepinfer::cpu
