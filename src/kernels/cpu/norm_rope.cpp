#include "kernels/cpu/norm_rope.h"

#include <cmath>

#include "core/check.h"
#include "kernels/cpu/vec.h"

namespace deepinfer::cpu {

void rms_norm(const RmsNormParams& p) {
  DI_CHECK(p.x && p.y && p.weight && p.ldx >= p.n && p.ldy >= p.n);
#pragma omp parallel for schedule(static) if (p.m > 4)
  for (int64_t r = 0; r < p.m; ++r) {
    const float* x = p.x + r * p.ldx;
    float* y = p.y + r * p.ldy;
    const float mean_sq = dot(x, x, p.n) / float(p.n);
    const float inv = 1.0f / std::sqrt(mean_sq + p.eps);
    for (int64_t i = 0; i < p.n; ++i) y[i] = x[i] * inv * p.weight[i];
  }
}

void rope(const RopeParams& p) {
  DI_CHECK(p.x && p.positions && p.inv_freq && p.rope_dim % 2 == 0);
  const int half = p.rope_dim / 2;
#pragma omp parallel for schedule(static) if (p.m > 4)
  for (int64_t r = 0; r < p.m; ++r) {
    const float pos = float(p.positions[r]);
    for (int i = 0; i < half; ++i) {
      const float angle = pos * p.inv_freq[i];
      const float c = std::cos(angle) * p.scale, s = std::sin(angle) * p.scale;
      for (int h = 0; h < p.n_heads; ++h) {
        float* x = p.x + r * p.ld_row + h * p.ld_head + 2 * i;
        const float a = x[0], b = x[1];
        x[0] = a * c - b * s;
        x[1] = a * s + b * c;
      }
    }
  }
}

}  // namespace deepinfer::cpu
