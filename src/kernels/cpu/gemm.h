// CPU linear-layer kernels (see kernels/ops.h for the params' contracts).
#pragma once

#include <cstdint>
#include <vector>

#include "core/aligned_vector.h"
#include "kernels/cpu/work_split.h"
#include "kernels/ops.h"

namespace deepinfer::cpu {

// bf16 copies of activation rows, for weights with act_dtype BF16; reused across calls.
struct Bf16Rows {
  AlignedVector<uint16_t> values;  // [m, n]
  std::vector<const uint16_t*> rows;  // [m]
};
// Rounds rows x[r][0, n), r < m, into buf (on the OpenMP threads); returns its row pointers.
const uint16_t* const* bf16_rows(const float* const* x, int64_t m, int64_t n, Bf16Rows& buf);
// Levels that pack (KernelTable::pack_bf16x): rows x[r][0, n), r < m, rounded to bf16 and packed
// into buf (on the OpenMP threads); returns buf's data.
const uint16_t* packed_bf16_rows(const float* const* x, int64_t m, int64_t n, AlignedVector<uint16_t>& buf);
// Whether linear/swiglu/moe run weight `w` on the active level's packed blocks (bf16 activations,
// KernelTable::packs); chosen by the weight, never by m.
bool runs_packed(const LinearWeight& w);
// Output columns per block on the packed blocks (m activation rows of n_in; weight rows of
// tile_row_bytes as tile panels, row_bytes as stored). Off tiles, column_block's. On tiles,
// column_block's for the panels in whole KernelTable::packed_block_align rows (amx: pairs of
// 16-row tiles; avx512bf16: tiles), with KernelTable::packed_panel_bytes of L2 where the
// activations outgrow a pass (else column_block's default budget). With one token tile (m <= 16)
// a block keeps only a ring of panels, so only the balance bounds it: a block's first group of
// tiles is copied before any arithmetic can overlap it (fp8 10944 x 2048 at m = 1: 7.4 GB/s with
// blocks of 64 rows, 9.7 with the balance's).
int64_t packed_column_block(int64_t n_out, int64_t n_in, int64_t tile_row_bytes, int64_t row_bytes, int64_t m);

// Backend::relaid_bytes / relay_weight on the CPU: fp8 and FP4 weights that run packed on a level
// whose packed blocks run on weight tiles (KernelTable::packs_tiles: amx; avx512bf16 for fp8 and
// int8), and bf16 ones where the level reads them so too (KernelTable::relays_bf16: amx), are
// relaid tile-major (LinearWeight::tile_major). Decode then streams each tile's weights in order,
// converting a chunk at a time in L1 right before its products (simd_amx.h,
// pair_tiles_avx512_bf16.h), where the stored rows would have to be gathered 16 at a time; amx's
// tiles read bf16 blocks where they lie, at every m.
size_t relaid_bytes(const LinearWeight& w);
LinearWeight relay_weight(const LinearWeight& w, void* out);

void embed(const EmbedParams& p);
void linear(const LinearParams& p);
void swiglu(const SwigluParams& p);
void mla_absorb_query(const MlaAbsorbQueryParams& p);
void mla_project_value(const MlaProjectValueParams& p);
}  // namespace deepinfer::cpu
