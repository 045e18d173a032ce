// Unit tests for RoPE/YaRN tables. Expected values follow the formulas of DeepSeek's reference
// (inference/model.py: precompute_freqs_cis, MLA.softmax_scale) worked by hand below.
#include "model/deepseek/yarn_rope.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/ops.h"

namespace deepinfer {
namespace {

ModelConfig rope_config(bool yarn) {
  ModelConfig c;
  c.qk_nope_head_dim = 64;
  c.qk_rope_head_dim = 32;
  c.rope_theta = 10000.0;
  c.rope_scaling.yarn = yarn;
  c.rope_scaling.factor = 40;
  c.rope_scaling.original_max_position_embeddings = 4096;
  c.rope_scaling.beta_fast = 32;
  c.rope_scaling.beta_slow = 1;
  c.rope_scaling.mscale = 1.0;
  c.rope_scaling.mscale_all_dim = 1.0;
  return c;
}

TEST(YarnRope, PlainRopeWithoutScaling) {
  const YarnRope r = make_yarn_rope(rope_config(false));
  ASSERT_EQ(r.inv_freq.size(), 16u);
  for (int i = 0; i < 16; ++i) EXPECT_FLOAT_EQ(r.inv_freq[size_t(i)], float(std::pow(10000.0, -2.0 * i / 32)));
  EXPECT_FLOAT_EQ(r.softmax_scale, float(1.0 / std::sqrt(96.0)));
  EXPECT_FLOAT_EQ(r.cos_sin_scale, 1.0f);
}

TEST(YarnRope, YarnInterpolatesLowFrequencies) {
  const YarnRope r = make_yarn_rope(rope_config(true));
  // correction dim d(r) = 32 * ln(4096 / (2 pi r)) / (2 ln 1e4): beta_fast 32 -> 5.24 (floor 5),
  // beta_slow 1 -> 11.26 (ceil 12). Pairs below 5 keep their frequency, pairs at or above 12
  // are divided by the factor, between them a linear blend.
  for (int i = 0; i < 16; ++i) {
    const double base = std::pow(10000.0, -2.0 * i / 32);
    const double ramp = std::clamp((i - 5.0) / (12.0 - 5.0), 0.0, 1.0);
    EXPECT_NEAR(r.inv_freq[size_t(i)], base / 40 * ramp + base * (1 - ramp), 1e-7 * base) << i;
  }
  EXPECT_FLOAT_EQ(r.inv_freq[0], 1.0f);
  EXPECT_FLOAT_EQ(r.inv_freq[15], float(std::pow(10000.0, -30.0 / 32) / 40));
  // softmax scale: 96^-0.5 * (0.1 * ln 40 + 1)^2 = 0.10206 * 1.36889^2
  EXPECT_NEAR(r.softmax_scale, 0.1020620726 * 1.3688879454 * 1.3688879454, 1e-6);
  EXPECT_FLOAT_EQ(r.cos_sin_scale, 1.0f);
}

TEST(YarnRope, MscaleRatioScalesCosSin) {
  ModelConfig c = rope_config(true);
  c.rope_scaling.mscale = 0.707;
  c.rope_scaling.mscale_all_dim = 0.707;
  EXPECT_FLOAT_EQ(make_yarn_rope(c).cos_sin_scale, 1.0f);
  c.rope_scaling.mscale = 1.0;
  c.rope_scaling.mscale_all_dim = 0.0;  // absent: no softmax correction, cos/sin scaled by mscale
  const YarnRope r = make_yarn_rope(c);
  EXPECT_NEAR(r.cos_sin_scale, 1.3688879454, 1e-6);
  EXPECT_FLOAT_EQ(r.softmax_scale, float(1.0 / std::sqrt(96.0)));
  EXPECT_DOUBLE_EQ(yarn_mscale(1.0, 5.0), 1.0);
}

TEST(YarnRope, RopeKernelRotatesInterleavedPairs) {
  // Pairs (x[2i], x[2i+1]) are complex numbers multiplied by e^{i * pos * inv_freq[i]}.
  float x[4] = {1.0f, 0.0f, 0.0f, 2.0f};
  const float inv_freq[2] = {0.5f, 1.0f};
  const int32_t pos = 3;
  cpu_backend().rope({x, 4, 0, 1, 1, 4, &pos, inv_freq, 1.0f});
  EXPECT_NEAR(x[0], std::cos(1.5), 1e-6);
  EXPECT_NEAR(x[1], std::sin(1.5), 1e-6);
  EXPECT_NEAR(x[2], -2 * std::sin(3.0), 1e-6);
  EXPECT_NEAR(x[3], 2 * std::cos(3.0), 1e-6);
}

}  // namespace
}  // namespace deepinfer
