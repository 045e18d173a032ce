#include "model/deepseek_v4/indexer.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace deepinfer {

namespace {

float score_scale(const IndexerWeights& w) { return float(1.0 / std::sqrt(double(w.head_dim)) / std::sqrt(double(w.n_heads))); }

// The topk best of scores[0, n_entries) (ties to the lower index), ascending, into selected.
int select_best(const IndexerWeights& w, const std::vector<float>& scores, int n_entries, int32_t* selected) {
  std::vector<int32_t> order(static_cast<size_t>(n_entries));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + w.topk, order.end(), [&](int32_t a, int32_t b) {
    return scores[size_t(a)] > scores[size_t(b)] || (scores[size_t(a)] == scores[size_t(b)] && a < b);
  });
  std::sort(order.begin(), order.begin() + w.topk);
  std::copy_n(order.begin(), w.topk, selected);
  return w.topk;
}

}  // namespace

void indexer_scores(Backend& backend, const IndexerWeights& w, const float* q, const float* head_weights,
                    const float* keys, int n_entries, std::vector<float>& dots, std::vector<float>& scores) {
  const float scale = score_scale(w);
  const LinearWeight key_matrix{DType::F32, keys, n_entries, w.head_dim, nullptr, 128, 128};
  dots.resize(size_t(w.n_heads) * size_t(n_entries));
  backend.linear({q, w.head_dim, w.n_heads, &key_matrix, dots.data(), n_entries});  // [n_heads, n_entries]
  scores.assign(size_t(n_entries), 0.0f);
  for (int h = 0; h < w.n_heads; ++h) {
    const float wh = head_weights[h] * scale;
    const float* d = dots.data() + size_t(h) * size_t(n_entries);
    for (int e = 0; e < n_entries; ++e) scores[size_t(e)] += wh * std::max(d[e], 0.0f);
  }
}

int indexer_select(Backend& backend, const IndexerWeights& w, const float* q, const float* head_weights,
                   const float* keys, int n_entries, int32_t* selected, std::vector<float>& dots,
                   std::vector<float>& scores) {
  if (n_entries <= w.topk) {
    std::iota(selected, selected + n_entries, 0);
    return n_entries;
  }
  indexer_scores(backend, w, q, head_weights, keys, n_entries, dots, scores);
  return select_best(w, scores, n_entries, selected);
}

int indexer_select_bf16(Backend& backend, const IndexerWeights& w, const float* q, const float* head_weights,
                        const void* const* keys, DType key_dtype, int n_entries, int32_t* selected,
                        std::vector<float>& weights, std::vector<float>& scores) {
  if (n_entries <= w.topk) {
    std::iota(selected, selected + n_entries, 0);
    return n_entries;
  }
  indexer_scores_bf16(backend, w, q, head_weights, keys, key_dtype, n_entries, weights, scores);
  return select_best(w, scores, n_entries, selected);
}

void indexer_scores_bf16(Backend& backend, const IndexerWeights& w, const float* q, const float* head_weights,
                         const void* const* keys, DType key_dtype, int n_entries, std::vector<float>& weights,
                         std::vector<float>& scores) {
  const float scale = score_scale(w);
  weights.resize(size_t(w.n_heads));
  for (int h = 0; h < w.n_heads; ++h) weights[size_t(h)] = head_weights[h] * scale;
  scores.resize(size_t(n_entries));
  backend.indexer_scores({q, weights.data(), keys, key_dtype, scores.data(), w.n_heads, w.head_dim, n_entries});
}

}  // namespace deepinfer
