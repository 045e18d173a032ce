// Rotary embedding tables for DeepSeek's MLA, with YaRN context extension as DeepSeek's
// reference (inference/model.py, precompute_freqs_cis) and Hugging Face's DeepseekV2/V3 apply it.
#pragma once

#include <vector>

#include "model/config.h"

namespace deepinfer {

struct YarnRope {
  std::vector<float> inv_freq;  // [qk_rope_head_dim / 2] radians per position
  float cos_sin_scale = 1.0f;   // mscale(factor, mscale) / mscale(factor, mscale_all_dim)
  float softmax_scale = 1.0f;   // qk_head_dim^-0.5 * mscale(factor, mscale_all_dim)^2
};

// 0.1 * mscale * ln(factor) + 1 for factor > 1, else 1.
double yarn_mscale(double factor, double mscale);

// Radians per position of each rotated pair [dim / 2]: base^(-2i / dim), with YaRN's
// interpolation ramp applied when `scaling` is yarn with factor > 1 (no cos/sin scaling here).
std::vector<float> yarn_inv_freq(int dim, double base, const RopeScaling& scaling);

YarnRope make_yarn_rope(const ModelConfig& c);

}  // namespace deepinfer
