// The kernel table for AMX (compiled with its own target flags; see src/kernels/CMakeLists.txt).
// Only entered when the CPU has AMX-BF16 and the OS granted the tile state (isa.h). It is the
// avx512bf16-fma level's table (AMX CPUs are Intel cores, whose FMAs outrun VDPBF16PS) plus the
// packed blocks: bf16, fp8 and FP4 weights with bf16 activations run on tiles at every batch size
// (simd_amx.h; gemm.h's runs_packed; all three relaid tile-major at load), and so do the absorbed
// and the expanded MLA attention with bf16 dots (mla_attention_amx.h, mla_expanded_attention_amx.h),
// sink attention with bf16 dots (sink_attention_amx.h) and the lightning indexer's scores
// (indexer_scores_amx.h).
#include "kernels/cpu/indexer_scores_amx.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/mla_attention_amx.h"
#include "kernels/cpu/mla_expanded_attention_amx.h"
#include "kernels/cpu/simd_amx.h"
#include "kernels/cpu/sink_attention_amx.h"

namespace deepinfer::cpu {

// Built on first use, after every table's static initialization.
const KernelTable& amx_kernels() {
  static const KernelTable table = [] {
    KernelTable t = kAvx512Bf16FmaKernels;
    t.packs = &amx::packs;
    t.packed_elems = &amx_packed_elems;
    t.pack_bf16x = &amx::pack_bf16x;
    t.linear_block_packed = &amx::linear_block_packed;
    t.swiglu_block_packed = &amx::swiglu_block_packed;
    t.packs_tiles = true;
    t.relays_bf16 = true;
    t.packed_panel_bytes = amx::kPanelBytes;
    t.packed_pass_bytes = amx::kPassBytes;
    t.mla_attend_row = &amx::mla_attend_row;
    t.mla_expanded_attend_chunk = &amx::mla_expanded_attend_chunk;
    t.attend_head_tile = amx::kTile;
    t.indexer_score_block = &amx::indexer_score_block;
    t.sink_attend_bf16 = &amx::sink_attend_bf16;
    return t;
  }();
  return table;
}

}  // namespace deepinfer::cpu
