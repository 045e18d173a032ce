#include "model/deepseek_v4/indexer.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace deepinfer {

int indexer_select(const IndexerWeights& w, const float* q, const float* head_weights, const float* keys,
                   int n_entries, int32_t* selected, std::vector<float>& scores) {
  if (n_entries <= w.topk) {
    std::iota(selected, selected + n_entries, 0);
    return n_entries;
  }
  const float scale = float(1.0 / std::sqrt(double(w.head_dim)) / std::sqrt(double(w.n_heads)));
  scores.assign(size_t(n_entries), 0.0f);
  for (int e = 0; e < n_entries; ++e) {
    const float* k = keys + size_t(e) * size_t(w.head_dim);
    float total = 0;
    for (int h = 0; h < w.n_heads; ++h) {
      const float* qh = q + size_t(h) * size_t(w.head_dim);
      float dot = 0;
      for (int i = 0; i < w.head_dim; ++i) dot += qh[i] * k[i];
      total += head_weights[h] * scale * std::max(dot, 0.0f);
    }
    scores[size_t(e)] = total;
  }
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
