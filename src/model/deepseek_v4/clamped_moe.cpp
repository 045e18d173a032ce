#include "model/deepseek_v4/clamped_moe.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace deepinfer {
namespace {

float silu(float x) { return x / (1.0f + std::exp(-x)); }

// A thread's buffers for the experts it runs when they run in parallel.
ClampedMoeScratch& expert_scratch() {
  thread_local ClampedMoeScratch s;
  return s;
}

}  // namespace

void clamped_expert_mlp(Backend& backend, const ExpertWeights& e, const float* x, int64_t m, int64_t hidden,
                        float limit, float* out, ClampedMoeScratch& s) {
  const int64_t inter = e.w1.n_out;
  if (s.gate.size() < size_t(m * inter)) s.gate.resize(size_t(m * inter));
  if (s.up.size() < size_t(m * inter)) s.up.resize(size_t(m * inter));
  backend.linear({x, hidden, m, &e.w1, s.gate.data(), inter});
  backend.linear({x, hidden, m, &e.w3, s.up.data(), inter});
  float* gate = s.gate.data();
  const float* up = s.up.data();
#pragma omp parallel for if (m > 1)
  for (int64_t i = 0; i < m * inter; ++i) {
    float g = gate[i], u = up[i];
    if (limit > 0) {
      g = std::min(g, limit);
      u = std::clamp(u, -limit, limit);
    }
    gate[i] = silu(g) * u;
  }
  backend.linear({s.gate.data(), inter, m, &e.w2, out, hidden});
}

void clamped_moe(Backend& backend, const std::vector<ExpertWeights>& experts, const ExpertWeights* shared,
                 float swiglu_limit, const float* x, int64_t n, int64_t hidden, int top_k, const int32_t* ids,
                 const float* weights, float* y, ClampedMoeScratch& s, float shared_limit) {
  if (n == 0) return;
  const int n_experts = int(experts.size());
  // The (row, j) pairs of each expert e, in increasing order: rows[starts[e], starts[e + 1]).
  s.starts.assign(size_t(n_experts) + 1, 0);
  for (int64_t i = 0; i < n * top_k; ++i) {
    DI_CHECK(ids[i] >= 0 && ids[i] < n_experts);
    ++s.starts[size_t(ids[i]) + 1];
  }
  for (int e = 0; e < n_experts; ++e) s.starts[size_t(e) + 1] += s.starts[size_t(e)];
  s.rows.resize(size_t(n * top_k));
  s.active.clear();
  for (int e = 0; e < n_experts; ++e)
    if (s.starts[size_t(e) + 1] > s.starts[size_t(e)]) s.active.push_back(e);
  {
    std::vector<int32_t>& next = s.cursor;
    next.assign(s.starts.begin(), s.starts.end() - 1);
    for (int64_t i = 0; i < n * top_k; ++i) s.rows[size_t(next[size_t(ids[i])]++)] = int32_t(i);
  }
  // acc[r, j]: row r's j-th expert output, summed below in increasing expert id.
  s.acc.resize(size_t(n * top_k * hidden));
  const int32_t* rows = s.rows.data();
  const int32_t* starts = s.starts.data();
  float* acc = s.acc.data();
  const auto run = [&](int e, ClampedMoeScratch& es) {
    const int64_t m = starts[e + 1] - starts[e];
    const int32_t* er = rows + starts[e];
    es.x.resize(size_t(m * hidden));
    es.out.resize(size_t(m * hidden));
    for (int64_t i = 0; i < m; ++i) std::copy_n(x + (er[i] / top_k) * hidden, hidden, es.x.data() + i * hidden);
    clamped_expert_mlp(backend, experts[size_t(e)], es.x.data(), m, hidden, swiglu_limit, es.out.data(), es);
    for (int64_t i = 0; i < m; ++i) std::copy_n(es.out.data() + i * hidden, hidden, acc + size_t(er[i]) * size_t(hidden));
  };
  // With at least two active experts per thread, each thread runs whole experts (one parallel
  // region, each expert's linears on one thread) instead of splitting every linear of every expert
  // across the threads (three parallel regions per expert, each ending when its slower half does).
  // An expert's result is the same either way: the kernels' bits do not depend on the threads.
  const int n_active = int(s.active.size());
  if (!omp_in_parallel() && omp_get_max_threads() > 1 && n_active >= 2 * omp_get_max_threads()) {
    const int* active = s.active.data();
#pragma omp parallel for schedule(dynamic, 1)
    for (int a = 0; a < n_active; ++a) run(active[a], expert_scratch());
  } else {
    for (int a = 0; a < n_active; ++a) run(s.active[size_t(a)], s);
  }
#pragma omp parallel for if (n > 1)
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
    const float* shared_out = s.out.data();
#pragma omp parallel for if (n > 1)
    for (int64_t i = 0; i < n * hidden; ++i) y[i] += shared_out[i];
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
