#include "model/deepseek_v41/engram.h"

#include <algorithm>
#include <cmath>

namespace deepinfer {

void engram_apply(Backend& backend, const V41EngramWeights& w, int hc, int64_t hidden, int n_rows_per_token,
                  float eps, const int64_t* rows, int64_t n, float* streams, EngramScratch& s) {
  if (n == 0) return;
  const int64_t dim = w.embed.dim, width = int64_t(n_rows_per_token) * dim, n_kv = int64_t(hc + 1) * hidden;
  s.e.resize(size_t(n * width));
  s.kv.resize(size_t(n * n_kv));
  for (int64_t r = 0; r < n; ++r)
    for (int i = 0; i < n_rows_per_token; ++i) w.embed.row(rows[r * n_rows_per_token + i], s.e.data() + r * width + i * dim);
  backend.linear({s.e.data(), width, n, &w.wkv, s.kv.data(), n_kv});
  const float inv_sqrt_d = float(1.0 / std::sqrt(double(hidden)));
#pragma omp parallel for if (n > 1)
  for (int64_t r = 0; r < n; ++r) {
    const float* kv = s.kv.data() + r * n_kv;
    const float* value = kv + int64_t(hc) * hidden;
    for (int k = 0; k < hc; ++k) {
      float* h = streams + (r * hc + k) * hidden;
      const float* key = kv + int64_t(k) * hidden;
      const float* qw = w.q_weight.data() + size_t(k) * size_t(hidden);
      const float* kw = w.k_weight.data() + size_t(k) * size_t(hidden);
      float hh = 0, kk = 0;
      for (int64_t i = 0; i < hidden; ++i) {
        hh += h[i] * h[i];
        kk += key[i] * key[i];
      }
      const float rh = 1.0f / std::sqrt(hh / float(hidden) + eps), rk = 1.0f / std::sqrt(kk / float(hidden) + eps);
      float dot = 0;
      for (int64_t i = 0; i < hidden; ++i) dot += (h[i] * rh * qw[i]) * (key[i] * rk * kw[i]);
      const float d = dot * inv_sqrt_d;
      const float signed_root = std::copysign(std::sqrt(std::max(std::fabs(d), 1e-6f)), d);
      const float gate = 1.0f / (1.0f + std::exp(-signed_root));
      for (int64_t i = 0; i < hidden; ++i) h[i] += gate * value[i];
    }
  }
}

}  // namespace deepinfer
