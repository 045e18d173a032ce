// The kernel table for the avx512 instruction set (compiled with its own target flags; see
// src/kernels/CMakeLists.txt). Only entered when the CPU supports it (isa.h).
#include "kernels/cpu/simd_avx512.h"
#include "kernels/cpu/gemm_kernels.h"
#include "kernels/cpu/fp4_widen_avx512.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/mla_attention_kernels.h"
#include "kernels/cpu/mla_expanded_attention_kernels.h"
#include "kernels/cpu/indexer_scores_kernels.h"
#include "kernels/cpu/sink_softmax.h"

namespace deepinfer::cpu {

const KernelTable kAvx512Kernels = {
    &linear_block_any<Avx512>,       &swiglu_block_any<Avx512>,       &outer_block<Avx512>,
    &linear_block_bf16x_any<Avx512>, &swiglu_block_bf16x_any<Avx512>, &round_to_bf16<Avx512>,
    &mla_attend_row<Avx512>,
    &mla_expanded_attend_chunk<Avx512>,
    &sink_softmax<Avx512>,
    &indexer_score_block<Avx512>};

}  // namespace deepinfer::cpu
