#include "model/deepseek/router.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace deepinfer {
namespace {

// Indices of the k largest values, descending, ties to the lower index.
std::vector<int> top_k(const std::vector<float>& v, int k) {
  std::vector<int> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int a, int b) { return v[size_t(a)] > v[size_t(b)] || (v[size_t(a)] == v[size_t(b)] && a < b); });
  idx.resize(size_t(k));
  return idx;
}

}  // namespace

void route_token(const ModelConfig& c, const float* logits, const float* bias, int32_t* ids, float* weights) {
  const int n = c.n_routed_experts, k = c.num_experts_per_tok;
  std::vector<float> scores(static_cast<size_t>(n));
  if (c.scoring_func == ScoringFunc::kSoftmax) {
    const float m = *std::max_element(logits, logits + n);
    float sum = 0;
    for (int e = 0; e < n; ++e) sum += scores[size_t(e)] = std::exp(logits[e] - m);
    for (float& s : scores) s /= sum;
  } else {
    for (int e = 0; e < n; ++e) scores[size_t(e)] = 1.0f / (1.0f + std::exp(-logits[e]));
  }

  std::vector<float> choice = scores;
  const bool use_bias = c.topk_method == TopkMethod::kNoauxTc && bias != nullptr;
  if (use_bias)
    for (int e = 0; e < n; ++e) choice[size_t(e)] += bias[e];

  if (c.topk_method != TopkMethod::kGreedy && c.n_group > 1) {
    const int per_group = n / c.n_group;
    std::vector<float> group_score(size_t(c.n_group));
    for (int g = 0; g < c.n_group; ++g) {
      std::vector<float> members(choice.begin() + g * per_group, choice.begin() + (g + 1) * per_group);
      if (c.topk_method == TopkMethod::kNoauxTc) {  // sum of the group's two best
        const auto best = top_k(members, 2);
        group_score[size_t(g)] = members[size_t(best[0])] + members[size_t(best[1])];
      } else {  // group_limited_greedy: the group's best
        group_score[size_t(g)] = *std::max_element(members.begin(), members.end());
      }
    }
    std::vector<bool> keep(size_t(c.n_group), false);
    for (int g : top_k(group_score, c.topk_group)) keep[size_t(g)] = true;
    for (int e = 0; e < n; ++e)
      if (!keep[size_t(e / per_group)]) choice[size_t(e)] = -INFINITY;
  }

  const std::vector<int> chosen = top_k(choice, k);
  float sum = 0;
  for (int i = 0; i < k; ++i) {
    ids[i] = chosen[size_t(i)];
    weights[i] = scores[size_t(chosen[size_t(i)])];
    sum += weights[i];
  }
  // DeepseekV3 normalizes (if asked) and always scales; DeepseekV2 scales only unnormalized weights.
  const bool normalize = c.norm_topk_prob && (c.is_v3 || k > 1);
  if (normalize)
    for (int i = 0; i < k; ++i) weights[i] /= sum + 1e-20f;
  if (c.is_v3 || !normalize)
    for (int i = 0; i < k; ++i) weights[i] *= float(c.routed_scaling_factor);
}

}  // namespace deepinfer
