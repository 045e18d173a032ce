// CPU linear-layer kernels (see kernels/ops.h for the params' contracts).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.h"

namespace deepinfer::cpu {

// bf16 copies of activation rows, for weights with act_dtype BF16; reused across calls.
struct Bf16Rows {
  std::vector<uint16_t> values;  // [m, n]
  std::vector<const uint16_t*> rows;  // [m]
};
// Rounds rows x[r][0, n), r < m, into buf (on the OpenMP threads); returns its row pointers.
const uint16_t* const* bf16_rows(const float* const* x, int64_t m, int64_t n, Bf16Rows& buf);

void embed(const EmbedParams& p);
void linear(const LinearParams& p);
void swiglu(const SwigluParams& p);
void mla_absorb_query(const MlaAbsorbQueryParams& p);
void mla_project_value(const MlaProjectValueParams& p);
}  // namespace deepinfer::cpu
