// The kernel tables for AVX-512 with BF16, levels avx512bf16 and avx512bf16-fma (compiled with
// their own target flags; see src/kernels/CMakeLists.txt). Only entered when the CPU supports it
// (isa.h). The f32-activation GEMM kernels are the AVX-512 ones (FP4 weights widened with VBMI
// here). bf16 activations against bf16, fp8 and FP4 weights: VDPBF16PS on avx512bf16, exact f32
// FMAs on avx512bf16-fma (simd_avx512_bf16.h's Dot policies); the bf16 attention runs VDPBF16PS on
// both.
#include "kernels/cpu/simd_avx512_bf16.h"
#include "kernels/cpu/gemm_kernels.h"
#include "kernels/cpu/fp4_widen_avx512_bf16.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/bf16_pair_dots_avx512_bf16.h"
#include "kernels/cpu/mla_attention_kernels.h"
#include "kernels/cpu/mla_expanded_attention_kernels.h"
#include "kernels/cpu/pair_tiles_avx512_bf16.h"
#include "kernels/cpu/indexer_scores_kernels.h"
#include "kernels/cpu/sink_softmax.h"

namespace deepinfer::cpu {
namespace {

// f32 activations: FP4 weights widened with VBMI (the same operations per output as the avx512
// level), every other dtype by the avx512 level's kernels.
void linear_block_f32(const float* const* x, int64_t m, const LinearWeight& w, int64_t o_begin, int64_t o_end,
                      float* y, int64_t ldy) {
  if (w.dtype == DType::F4_E2M1) return fp4_linear_block<Avx512Bf16, float>(x, m, w, o_begin, o_end, y, ldy);
  kAvx512Kernels.linear_block(x, m, w, o_begin, o_end, y, ldy);
}
void swiglu_block_f32(const float* const* x, int64_t m, const LinearWeight& gate, const LinearWeight& up,
                      int64_t o_begin, int64_t o_end, float* y, int64_t ldy) {
  if (gate.dtype == DType::F4_E2M1) return fp4_swiglu_block<Avx512Bf16, float>(x, m, gate, up, o_begin, o_end, y, ldy);
  kAvx512Kernels.swiglu_block(x, m, gate, up, o_begin, o_end, y, ldy);
}

}  // namespace

// fp8 and int8 weights with bf16 activations also as packed blocks, relaid tile-major at load: one
// output per lane (pair_tiles_avx512_bf16.h).
const KernelTable kAvx512Bf16Kernels = {
    .linear_block = &linear_block_f32,
    .swiglu_block = &swiglu_block_f32,
    .outer_block = kAvx512Kernels.outer_block,
    .linear_block_bf16x = &linear_block_bf16x_any<Avx512Bf16>,
    .swiglu_block_bf16x = &swiglu_block_bf16x_any<Avx512Bf16>,
    .round_to_bf16 = &round_to_bf16<Avx512Bf16>,
    .mla_attend_row = &mla_attend_row<Avx512Bf16>,
    .mla_expanded_attend_chunk = &mla_expanded_attend_chunk<Avx512Bf16>,
    .sink_softmax = &sink_softmax<Avx512Bf16>,
    .indexer_score_block = &indexer_score_block<Avx512Bf16>,
    .packs = &pair_tiles::packs,
    .packed_elems = &pair_tiles::packed_elems,
    .pack_bf16x = &pair_tiles::pack_rows,
    .linear_block_packed = &pair_tiles::linear_block_packed,
    .swiglu_block_packed = &pair_tiles::swiglu_block_packed,
    .packs_tiles = true,
    .packed_block_align = pair_tiles::kTile};

// bf16 and fp8 weights with bf16 activations also as packed blocks: a call's rows split once.
const KernelTable kAvx512Bf16FmaKernels = {
    .linear_block = &linear_block_f32,
    .swiglu_block = &swiglu_block_f32,
    .outer_block = kAvx512Kernels.outer_block,
    .linear_block_bf16x = &linear_block_bf16x_any<Avx512Bf16Fma>,
    .swiglu_block_bf16x = &swiglu_block_bf16x_any<Avx512Bf16Fma>,
    .round_to_bf16 = &round_to_bf16<Avx512Bf16Fma>,
    .mla_attend_row = &mla_attend_row<Avx512Bf16>,
    .mla_expanded_attend_chunk = &mla_expanded_attend_chunk<Avx512Bf16>,
    .sink_softmax = &sink_softmax<Avx512Bf16>,
    .indexer_score_block = &indexer_score_block<Avx512Bf16Fma>,
    .packs = &packs_split,
    .packed_elems = &split_packed_elems<Avx512Bf16Fma>,
    .pack_bf16x = &pack_split_rows<Avx512Bf16Fma>,
    .linear_block_packed = &linear_block_split_packed<Avx512Bf16Fma>,
    .swiglu_block_packed = &swiglu_block_split_packed<Avx512Bf16Fma>};

}  // namespace deepinfer::cpu
