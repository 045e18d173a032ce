// A sink attention head's softmax over a SIMD traits type V (simd_*.h; KernelTable::sink_softmax),
// included by each kernels_<isa>.cpp.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/vexp.h"

namespace deepinfer::cpu {
namespace {

// s[t] <- e^(s[t] * scale - mx) / (e^(sink - mx) + sum_u e^(s[u] * scale - mx)), t < n, with
// mx = max(sink, max_t s[t] * scale) (exact, in any order). The exponentials are vexp's, summed
// lane-wise V::kW at a time in ascending t (the last few lane-masked) and then by V::hsum, plus the
// sink's; each weight is its exponential times the sum's reciprocal. The bits depend only on s,
// n, sink and scale.
template <class V>
void sink_softmax(float* s, int64_t n, float sink, float scale) {
  using F = typename V::F;
  const F sc = V::bcast(scale);
  F mv = V::bcast(sink);
  float mx = sink;
  int64_t t = 0;
  for (; t + V::kW <= n; t += V::kW) {
    const F x = V::mul(V::load(s + t), sc);
    V::store(s + t, x);
    mv = V::max(mv, x);
  }
  for (int64_t u = t; u < n; ++u) mx = std::max(mx, s[u] *= scale);  // the same product as a lane's
  mx = std::max(mx, V::hmax(mv));
  const F sum = exp_shifted_n<V>(s, n, mx);
  alignas(64) float e_sink[V::kW];
  V::store(e_sink, vexp<V>(V::bcast(sink - mx)));
  const F inv = V::bcast(1.0f / (V::hsum(sum) + e_sink[0]));
  for (t = 0; t + V::kW <= n; t += V::kW) V::store(s + t, V::mul(V::load(s + t), inv));
  if (t < n) V::store_n(s + t, V::mul(V::load_n(s + t, int(n - t)), inv), int(n - t));
}

}  // namespace
}  // namespace deepinfer::cpu
