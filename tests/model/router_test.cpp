// Unit tests for MoE routing. Expected choices and weights are worked by hand from the rules of
// DeepSeek's reference Gate (inference/model.py) and Hugging Face's DeepseekV2/V3 MoEGate.
#include "model/deepseek/router.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace deepinfer {
namespace {

ModelConfig moe_config(TopkMethod method, ScoringFunc scoring, int n_group, int topk_group, int k) {
  ModelConfig c;
  c.n_routed_experts = 8;
  c.num_experts_per_tok = k;
  c.n_group = n_group;
  c.topk_group = topk_group;
  c.topk_method = method;
  c.scoring_func = scoring;
  return c;
}

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

Routed route(const ModelConfig& c, const std::vector<float>& logits, const std::vector<float>& bias = {}) {
  Routed r{std::vector<int32_t>(size_t(c.num_experts_per_tok)), std::vector<float>(size_t(c.num_experts_per_tok))};
  route_token(c, logits.data(), bias.empty() ? nullptr : bias.data(), r.ids.data(), r.weights.data());
  return r;
}

const std::vector<float> kLogits = {0.1f, 2.0f, -1.0f, 0.5f, 1.5f, 0.0f, 3.0f, -0.5f};

TEST(Router, GreedySoftmaxUnnormalized) {
  ModelConfig c = moe_config(TopkMethod::kGreedy, ScoringFunc::kSoftmax, 1, 1, 3);
  c.routed_scaling_factor = 1.0;
  const Routed r = route(c, kLogits);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{6, 1, 4}));
  double z = 0;
  for (float l : kLogits) z += std::exp(double(l));
  EXPECT_NEAR(r.weights[0], std::exp(3.0) / z, 1e-6);
  EXPECT_NEAR(r.weights[1], std::exp(2.0) / z, 1e-6);
  EXPECT_NEAR(r.weights[2], std::exp(1.5) / z, 1e-6);
}

TEST(Router, V2ScalesOnlyUnnormalizedWeights) {
  ModelConfig c = moe_config(TopkMethod::kGreedy, ScoringFunc::kSoftmax, 1, 1, 2);
  c.routed_scaling_factor = 16.0;
  const Routed scaled = route(c, kLogits);
  c.norm_topk_prob = true;
  const Routed normalized = route(c, kLogits);
  double z = 0;
  for (float l : kLogits) z += std::exp(double(l));
  EXPECT_NEAR(scaled.weights[0], 16.0 * std::exp(3.0) / z, 1e-5);
  EXPECT_NEAR(normalized.weights[0] + normalized.weights[1], 1.0, 1e-6);
  EXPECT_NEAR(normalized.weights[0], std::exp(3.0) / (std::exp(3.0) + std::exp(2.0)), 1e-6);
}

TEST(Router, GroupLimitedGreedyUsesGroupMax) {
  // 4 groups of 2: maxima 2.0 (g0), 0.5 (g1), 1.5 (g2), 3.0 (g3); top-2 groups: g3, g0.
  ModelConfig c = moe_config(TopkMethod::kGroupLimitedGreedy, ScoringFunc::kSoftmax, 4, 2, 3);
  const Routed r = route(c, kLogits);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{6, 1, 0}));  // expert 4 (1.5) is in a dropped group
}

TEST(Router, NoauxTcSigmoidWithBiasAndNormalization) {
  // Bias changes the choice, not the weights: expert 2 gets +5 and is chosen; its weight is
  // still sigmoid(-1). Groups (of 2) score by the sum of their two best biased scores.
  ModelConfig c = moe_config(TopkMethod::kNoauxTc, ScoringFunc::kSigmoid, 4, 2, 2);
  c.is_v3 = true;
  c.norm_topk_prob = true;
  c.routed_scaling_factor = 2.5;
  const std::vector<float> bias = {0, 0, 5, 0, 0, 0, 0, 0};
  const Routed r = route(c, kLogits, bias);
  auto sig = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  // group sums: g0 = s(0.1)+s(2) = 1.406, g1 = s(-1)+5+s(0.5) = 5.891, g2 = 1.122, g3 = 1.329
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2, 1}));
  const double w2 = sig(-1.0), w1 = sig(2.0);
  EXPECT_NEAR(r.weights[0], 2.5 * w2 / (w2 + w1), 1e-6);
  EXPECT_NEAR(r.weights[1], 2.5 * w1 / (w2 + w1), 1e-6);
}

TEST(Router, TiesGoToTheLowerExpert) {
  ModelConfig c = moe_config(TopkMethod::kGreedy, ScoringFunc::kSoftmax, 1, 1, 2);
  const Routed r = route(c, std::vector<float>(8, 1.0f));
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0, 1}));
}

}  // namespace
}  // namespace deepinfer
