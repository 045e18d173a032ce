// CPU attention with sinks over one shared K=V head (see kernels/ops.h's SinkAttentionParams).
#pragma once

#include "kernels/ops.h"

namespace deepinfer::cpu {
void sink_attention(const SinkAttentionParams& p);
}  // namespace deepinfer::cpu
