// The kernel table for AVX-512 with BF16 (compiled with its own target flags; see
// src/kernels/CMakeLists.txt). Only entered when the CPU supports it (isa.h). The f32-activation
// GEMM kernels are the AVX-512 ones; bf16 activations and bf16 attention scores use VDPBF16PS
// (simd_avx512_bf16.h).
#include "kernels/cpu/simd_avx512_bf16.h"
#include "kernels/cpu/gemm_kernels.h"
#include "kernels/cpu/fp4_widen_avx512_bf16.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/mla_attention_kernels.h"
#include "kernels/cpu/mla_expanded_pair_values.h"

namespace deepinfer::cpu {

const KernelTable kAvx512Bf16Kernels = {
    kAvx512Kernels.linear_block,    kAvx512Kernels.swiglu_block,    kAvx512Kernels.outer_block,
    &linear_block_bf16x_any<Avx512Bf16>, &swiglu_block_bf16x_any<Avx512Bf16>, &round_to_bf16<Avx512Bf16>,
    &mla_attend_row<Avx512Bf16>,
    &mla_expanded_attend_chunk<Avx512Bf16>};

}  // namespace deepinfer::cpu
