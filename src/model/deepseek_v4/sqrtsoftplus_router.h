// DeepSeek-V4's MoE router (reused by V4.1): scores s = sqrt(softplus(x . Wg^T / gate_temp))
// (gate_temp 1 in V4); experts are
// the top-k of s + bias (noaux_tc) or, in hash-routed layers, tid2eid[token id]; weights are
// s[chosen] / sum(s[chosen]) * routed_scaling_factor.
#pragma once

#include <cstdint>
#include <vector>

namespace deepinfer {

struct SqrtSoftplusRouter {
  int n_experts = 0;
  int top_k = 0;
  float routed_scaling_factor = 1.0f;
  float gate_temp = 1.0f;        // V4.1's router temperature
  std::vector<float> bias;       // [n_experts] (score-based layers), empty when hash-routed
  std::vector<int32_t> tid2eid;  // [vocab, top_k] (hash-routed layers), empty otherwise
  bool hashed() const { return !tid2eid.empty(); }

  // logits: [n_experts] = x . Wg^T for one token. Writes ids [top_k] and weights [top_k].
  void route(const float* logits, int32_t token_id, int32_t* ids, float* weights) const;
};

}  // namespace deepinfer
