// e^x over a SIMD traits type V (simd_*.h), shared by the attention's softmax and the pair tiles'
// SwiGLU epilogue.
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

}  // namespace
}  // namespace deepinfer::cpu
