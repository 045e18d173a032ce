// The kernel table for the avx2 instruction set (compiled with its own target flags; see
// src/kernels/CMakeLists.txt). Only entered when the CPU supports it (isa.h).
#include "kernels/cpu/simd_avx2.h"
#include "kernels/cpu/gemm_kernels.h"
#include "kernels/cpu/fp4_widen_avx2.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/mla_attention_kernels.h"
#include "kernels/cpu/mla_expanded_attention_kernels.h"
#include "kernels/cpu/indexer_scores_kernels.h"
#include "kernels/cpu/sink_softmax.h"

namespace deepinfer::cpu {

const KernelTable kAvx2Kernels = {
    &linear_block_any<Avx2>,       &swiglu_block_any<Avx2>,       &outer_block<Avx2>,
    &linear_block_bf16x_any<Avx2>, &swiglu_block_bf16x_any<Avx2>, &round_to_bf16<Avx2>,
    &mla_attend_row<Avx2>,
    &mla_expanded_attend_chunk<Avx2>,
    &sink_softmax<Avx2>,
    &indexer_score_block<Avx2>};

}  // namespace deepinfer::cpu
