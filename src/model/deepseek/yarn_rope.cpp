#include "model/deepseek/yarn_rope.h"

#include <algorithm>
#include <cmath>

namespace deepinfer {

double yarn_mscale(double factor, double mscale) {
  return factor <= 1.0 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0;
}

std::vector<float> yarn_inv_freq(int dim, double base, const RopeScaling& y) {
  const int half = dim / 2;
  std::vector<double> freq(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) freq[size_t(i)] = 1.0 / std::pow(base, double(2 * i) / dim);
  if (y.yarn && y.factor > 1.0) {
    // Dimensions rotating fewer than beta_slow times over the original context are
    // interpolated (divided by factor); more than beta_fast times kept; a linear ramp between.
    auto correction_dim = [&](double n_rot) {
      return dim * std::log(y.original_max_position_embeddings / (n_rot * 2 * M_PI)) / (2 * std::log(base));
    };
    const double low = std::max(std::floor(correction_dim(y.beta_fast)), 0.0);
    double high = std::min(std::ceil(correction_dim(y.beta_slow)), double(dim - 1));
    if (low == high) high += 0.001;
    for (int i = 0; i < half; ++i) {
      const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
      const double keep = 1.0 - ramp;  // 1: extrapolate (keep), 0: interpolate
      freq[size_t(i)] = freq[size_t(i)] / y.factor * (1.0 - keep) + freq[size_t(i)] * keep;
    }
  }
  return std::vector<float>(freq.begin(), freq.end());
}

YarnRope make_yarn_rope(const ModelConfig& c) {
  const RopeScaling& y = c.rope_scaling;
  YarnRope out;
  out.inv_freq = yarn_inv_freq(c.qk_rope_head_dim, c.rope_theta, y);

  out.softmax_scale = float(1.0 / std::sqrt(double(c.qk_head_dim())));
  if (y.yarn) {
    if (y.mscale_all_dim != 0.0) {
      const double m = yarn_mscale(y.factor, y.mscale_all_dim);
      out.softmax_scale = float(out.softmax_scale * m * m);
    }
    out.cos_sin_scale = float(yarn_mscale(y.factor, y.mscale) / yarn_mscale(y.factor, y.mscale_all_dim));
  }
  return out;
}

}  // namespace deepinfer
