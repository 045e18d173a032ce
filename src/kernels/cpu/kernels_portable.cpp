// The kernel table for the portable instruction set (compiled with its own target flags; see
// src/kernels/CMakeLists.txt). Only entered when the CPU supports it (isa.h).
#include "kernels/cpu/simd_portable.h"
#include "kernels/cpu/gemm_kernels.h"
#include "kernels/cpu/fp4_kernels.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/mla_attention_kernels.h"
#include "kernels/cpu/mla_expanded_attention_kernels.h"
#include "kernels/cpu/indexer_scores_kernels.h"
#include "kernels/cpu/sink_softmax.h"

namespace deepinfer::cpu {

const KernelTable kPortableKernels = {
    &linear_block_any<Portable>,       &swiglu_block_any<Portable>,       &outer_block<Portable>,
    &linear_block_bf16x_any<Portable>, &swiglu_block_bf16x_any<Portable>, &round_to_bf16<Portable>,
    &mla_attend_row<Portable>,
    &mla_expanded_attend_chunk<Portable>,
    &sink_softmax<Portable>,
    &indexer_score_block<Portable>};

}  // namespace deepinfer::cpu
