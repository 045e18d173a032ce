// CPU linear-layer kernels (see kernels/ops.h for the params' contracts).
#pragma once

#include "kernels/ops.h"

namespace deepinfer::cpu {
void embed(const EmbedParams& p);
void linear(const LinearParams& p);
void swiglu(const SwigluParams& p);
void mla_absorb_query(const MlaAbsorbQueryParams& p);
void mla_project_value(const MlaProjectValueParams& p);
}  // namespace deepinfer::cpu
