// e^x over a SIMD traits type V (simd_*.h), shared by the attentions' softmax (MLA's, and
// sink_softmax.h's) and the SwiGLU kernels' epilogue (silu_mul_n).
#pragma once

namespace deepinfer::cpu {
namespace {

// e^x, |relative error| < 2e-7 for x in [-87, 88]; inputs are clamped to that range.
template <class V>
typename V::F vexp(typename V::F x) {
  using F = typename V::F;
  x = V::max(V::min(x, V::bcast(88.0f)), V::bcast(-87.33f));
  const F n = V::round(V::mul(x, V::bcast(1.44269504f)));
  F r = V::fma(n, V::bcast(-0.693359375f), x);
  r = V::fma(n, V::bcast(2.12194440e-4f), r);
  F p = V::bcast(1.9875691500e-4f);
  p = V::fma(p, r, V::bcast(1.3981999507e-3f));
  p = V::fma(p, r, V::bcast(8.3334519073e-3f));
  p = V::fma(p, r, V::bcast(4.1665795894e-2f));
  p = V::fma(p, r, V::bcast(1.6666665459e-1f));
  p = V::fma(p, r, V::bcast(5.0000001201e-1f));
  p = V::fma(p, V::mul(r, r), V::add(r, V::bcast(1.0f)));
  return V::scale_pow2(p, n);
}

// s[t] <- e^(s[t] - m) for t < n, V::kW at a time (the last few lane-masked); returns their
// lane-wise sums in ascending t (the lanes past n add 0), for V::hsum: the softmaxes' exponentials.
template <class V>
typename V::F exp_shifted_n(float* s, int64_t n, float m) {
  using F = typename V::F;
  const F mv = V::bcast(m);
  F sum = V::zero();
  int64_t t = 0;
  for (; t + V::kW <= n; t += V::kW) {
    const F e = vexp<V>(V::add(V::load(s + t), V::mul(mv, V::bcast(-1.0f))));
    V::store(s + t, e);
    sum = V::add(sum, e);
  }
  if (t < n) {
    const int k = int(n - t);
    V::store_n(s + t, vexp<V>(V::add(V::load_n(s + t, k), V::mul(mv, V::bcast(-1.0f)))), k);
    sum = V::add(sum, V::load_n(s + t, k));
  }
  return sum;
}

// y[i] = silu(g[i]) * u[i] = g / (1 + e^-g) * u for i < n, V::kW outputs at a time with vexp's e^x
// (the last few lane-masked): each output's operations depend only on its g and u. g may be y.
template <class V>
void silu_mul_n(const float* g, const float* u, int64_t n, float* y) {
  using F = typename V::F;
  const auto at = [&](int64_t i, int k) {
    const F gv = k == V::kW ? V::load(g + i) : V::load_n(g + i, k);
    const F uv = k == V::kW ? V::load(u + i) : V::load_n(u + i, k);
    const F e = vexp<V>(V::mul(gv, V::bcast(-1.0f)));
    return V::mul(V::div(gv, V::add(V::bcast(1.0f), e)), uv);
  };
  int64_t i = 0;
  for (; i + V::kW <= n; i += V::kW) V::store(y + i, at(i, V::kW));
  if (i < n) V::store_n(y + i, at(i, int(n - i)), int(n - i));
}

}  // namespace
}  // namespace deepinfer::cpu
