// MoE routing for DeepSeek-V2/V3: scores from the gate logits, optional group limiting, top-k,
// weights from the unbiased scores, normalization and scaling.
#pragma once

#include <cstdint>

#include "model/config.h"

namespace deepinfer {

// logits: [n_routed_experts] gate logits of one token; bias: [n_routed_experts]
// (e_score_correction_bias, noaux_tc only) or nullptr. Writes num_experts_per_tok expert ids
// (descending by selection score, ties to the lower id) and their weights.
void route_token(const ModelConfig& c, const float* logits, const float* bias, int32_t* ids, float* weights);

}  // namespace deepinfer
