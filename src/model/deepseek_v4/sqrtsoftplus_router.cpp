#include "model/deepseek_v4/sqrtsoftplus_router.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/check.h"

namespace deepinfer {
namespace {

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }  // as torch, threshold 20

}  // namespace

void SqrtSoftplusRouter::route(const float* logits, int32_t token_id, int32_t* ids, float* weights) const {
  DI_CHECK(top_k <= n_experts && top_k <= 64);
  float s[1024];
  DI_CHECK(n_experts <= 1024);
  for (int e = 0; e < n_experts; ++e) s[e] = std::sqrt(softplus(logits[e] / gate_temp));
  if (hashed()) {
    std::copy_n(tid2eid.data() + size_t(token_id) * size_t(top_k), top_k, ids);
  } else {
    int32_t order[1024];
    std::iota(order, order + n_experts, 0);
    auto biased = [&](int32_t e) { return s[e] + bias[size_t(e)]; };
    std::partial_sort(order, order + top_k, order + n_experts, [&](int32_t a, int32_t b) {
      return biased(a) > biased(b) || (biased(a) == biased(b) && a < b);
    });
    std::copy_n(order, top_k, ids);
  }
  float sum = 0;
  for (int j = 0; j < top_k; ++j) sum += s[ids[j]];
  for (int j = 0; j < top_k; ++j) weights[j] = s[ids[j]] / sum * routed_scaling_factor;
}

}  // namespace deepinfer
