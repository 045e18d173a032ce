#include "model/deepseek_v4/indexer.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace deepinfer {

void indexer_scores(Backend& backend, const IndexerWeights& w, const float* q, const float* head_weights,
                    const float* keys, int n_entries, std::vector<float>& dots, std::vector<float>& scores) {
  const float scale = float(1.0 / std::sqrt(double(w.head_dim)) / std::sqrt(double(w.n_heads)));
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
  std::vector<int32_t> order(static_cast<size_t>(n_entries));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + w.topk, order.end(), [&](int32_t a, int32_t b) {
    return scores[size_t(a)] > scores[size_t(b)] || (scores[size_t(a)] == scores[size_t(b)] && a < b);
  });
  std::sort(order.begin(), order.begin() + w.topk);
  std::copy_n(order.begin(), w.topk, selected);
  return w.topk;
}

}  // namespace deepinfer
