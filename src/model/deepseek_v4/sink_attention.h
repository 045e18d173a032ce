// Attention with sinks over one shared K=V head (DeepSeek-V4's sliding window plus compressed
// entries; reused by V4.1): for each query head h,
//   out_h = sum_t exp(s_t) k_t / (sum_t exp(s_t) + exp(sink_h)),  s_t = q_h . k_t * scale,
// over the keys the caller gathered (window entries, then selected compressed entries).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.h"

namespace deepinfer {

// q: [n_heads, dim]; keys: [n_keys, dim] (also the values); sink: [n_heads]; out: [n_heads, dim].
// The q . k products run as one GEMM on the backend (keys as an f32 weight); `scores` is scratch.
void sink_attention(Backend& backend, const float* q, int n_heads, int dim, const float* keys, int n_keys,
                    const float* sink, float scale, float* out, std::vector<float>& scores);

}  // namespace deepinfer
