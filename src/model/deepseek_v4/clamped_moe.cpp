#include "model/deepseek_v4/clamped_moe.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace deepinfer {
namespace {

float silu(float x) { return x / (1.0f + std::exp(-x)); }

}  // namespace

void clamped_expert_mlp(Backend& backend, const ExpertWeights& e, const float* x, int64_t m, int64_t hidden,
                        float limit, float* out, ClampedMoeScratch& s) {
  const int64_t inter = e.w1.n_out;
  if (s.gate.size() < size_t(m * inter)) s.gate.resize(size_t(m * inter));
  if (s.up.size() < size_t(m * inter)) s.up.resize(size_t(m * inter));
  backend.linear({x, hidden, m, &e.w1, s.gate.data(), inter});
  backend.linear({x, hidden, m, &e.w3, s.up.data(), inter});
  for (int64_t i = 0; i < m * inter; ++i) {
    float g = s.gate[size_t(i)], u = s.up[size_t(i)];
    if (limit > 0) {
      g = std::min(g, limit);
      u = std::clamp(u, -limit, limit);
    }
    s.gate[size_t(i)] = silu(g) * u;
  }
  backend.linear({s.gate.data(), inter, m, &e.w2, out, hidden});
}

void clamped_moe(Backend& backend, const std::vector<ExpertWeights>& experts, const ExpertWeights* shared,
                 float swiglu_limit, const float* x, int64_t n, int64_t hidden, int top_k, const int32_t* ids,
                 const float* weights, float* y, ClampedMoeScratch& s, float shared_limit) {
  if (n == 0) return;
  const int n_experts = int(experts.size());
  // acc[r, j]: row r's j-th expert output, summed below in increasing expert id.
  s.acc.resize(size_t(n * top_k * hidden));
  for (int e = 0; e < n_experts; ++e) {
    s.rows.clear();
    for (int64_t i = 0; i < n * top_k; ++i) {
      DI_CHECK(ids[i] >= 0 && ids[i] < n_experts);
      if (ids[i] == e) s.rows.push_back(int32_t(i));
    }
    if (s.rows.empty()) continue;
    const int64_t m = int64_t(s.rows.size());
    s.x.resize(size_t(m * hidden));
    s.out.resize(size_t(m * hidden));
    for (int64_t i = 0; i < m; ++i) std::copy_n(x + (s.rows[size_t(i)] / top_k) * hidden, hidden, s.x.data() + i * hidden);
    clamped_expert_mlp(backend, experts[size_t(e)], s.x.data(), m, hidden, swiglu_limit, s.out.data(), s);
    for (int64_t i = 0; i < m; ++i)
      std::copy_n(s.out.data() + i * hidden, hidden, s.acc.data() + size_t(s.rows[size_t(i)]) * size_t(hidden));
  }
  for (int64_t r = 0; r < n; ++r) {
    int order[64];
    DI_CHECK(top_k <= 64);
    for (int j = 0; j < top_k; ++j) order[j] = j;
    std::sort(order, order + top_k, [&](int a, int b) { return ids[r * top_k + a] < ids[r * top_k + b]; });
    float* yr = y + r * hidden;
    std::fill_n(yr, hidden, 0.0f);
    for (int i = 0; i < top_k; ++i) {
      const int j = order[i];
      const float w = weights[r * top_k + j];
      const float* src = s.acc.data() + size_t(r * top_k + j) * size_t(hidden);
      for (int64_t c = 0; c < hidden; ++c) yr[c] += src[c] * w;
    }
  }
  if (shared) {
    s.out.resize(size_t(n * hidden));
    clamped_expert_mlp(backend, *shared, x, n, hidden, shared_limit, s.out.data(), s);
    for (int64_t i = 0; i < n * hidden; ++i) y[i] += s.out[size_t(i)];
  }
}

void clamped_moe_expert_parallel(ExpertParallelMoe& ep, int layer, Backend& backend,
                                 const std::vector<ExpertWeights>& experts, const ExpertWeights* shared,
                                 float swiglu_limit, const float* x, int64_t n, int64_t hidden, int top_k,
                                 const int32_t* ids, const float* weights, float* y, ClampedMoeScratch& s,
                                 float shared_limit) {
  const auto routed = [&](const float* rx, int64_t ldx, int64_t m, const int32_t* expert_ids, float* out) {
    s.packed.resize(size_t(m * hidden));
    for (int64_t r = 0; r < m; ++r) std::copy_n(rx + r * ldx, hidden, s.packed.data() + r * hidden);
    s.ones.assign(size_t(m), 1.0f);
    clamped_moe(backend, experts, nullptr, swiglu_limit, s.packed.data(), m, hidden, 1, expert_ids, s.ones.data(), out,
                s);
  };
  ExpertParallelMoe::SharedExperts shared_fn;
  if (shared)
    shared_fn = [&](const float* sx, int64_t ldx, int64_t m, float* out) {
      DI_CHECK(ldx == hidden);
      clamped_expert_mlp(backend, *shared, sx, m, hidden, shared_limit, out, s);
    };
  ep.run(layer, x, hidden, n, hidden, top_k, ids, weights, int(experts.size()), routed, shared_fn, y, hidden);
}

}  // namespace deepinfer
