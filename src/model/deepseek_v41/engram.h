// DeepSeek-V4.1's Engram (M:887-958): before an Engram layer's hyper-connection mix, each row
// looks up its (N - 1) * n_heads hashed table rows (engram_hash.h), projects their concatenation
// e [(N - 1) * n_heads * engram_head_dim] with wkv into one key per stream and one value,
//   key_k = (wkv e)[k * hidden .. (k + 1) * hidden), value = (wkv e)[hc * hidden .. ),
// and adds to each stream h_k its gated value:
//   d_k    = (h_k * rsqrt(mean(h_k^2) + eps) * q_weight_k) . (key_k * rsqrt(mean(key_k^2) + eps) * k_weight_k) / sqrt(hidden)
//   gate_k = sigmoid(sign(d_k) * sqrt(max(|d_k|, 1e-6))),   h_k += gate_k * value.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.h"
#include "model/deepseek_v41/weights.h"

namespace deepinfer {

struct EngramScratch {
  std::vector<float> e, kv;
};

// rows: [n, n_rows_per_token] table rows; streams: [n, hc, hidden], updated in place.
void engram_apply(Backend& backend, const V41EngramWeights& w, int hc, int64_t hidden, int n_rows_per_token,
                  float eps, const int64_t* rows, int64_t n, float* streams, EngramScratch& s);

}  // namespace deepinfer
