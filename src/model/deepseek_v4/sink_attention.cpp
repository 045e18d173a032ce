#include "model/deepseek_v4/sink_attention.h"

#include <algorithm>
#include <cmath>

namespace deepinfer {

void sink_attention(const float* q, int n_heads, int dim, const float* keys, int n_keys, const float* sink,
                    float scale, float* out, std::vector<float>& scores) {
  scores.resize(size_t(n_keys));
  for (int h = 0; h < n_heads; ++h) {
    const float* qh = q + size_t(h) * size_t(dim);
    float mx = sink[h];
    for (int t = 0; t < n_keys; ++t) {
      const float* k = keys + size_t(t) * size_t(dim);
      float dot = 0;
      for (int i = 0; i < dim; ++i) dot += qh[i] * k[i];
      scores[size_t(t)] = dot * scale;
      mx = std::max(mx, scores[size_t(t)]);
    }
    float sum = std::exp(sink[h] - mx);
    float* oh = out + size_t(h) * size_t(dim);
    std::fill_n(oh, dim, 0.0f);
    for (int t = 0; t < n_keys; ++t) {
      const float p = std::exp(scores[size_t(t)] - mx);
      sum += p;
      const float* k = keys + size_t(t) * size_t(dim);
      for (int i = 0; i < dim; ++i) oh[i] += p * k[i];
    }
    const float inv = 1.0f / sum;
    for (int i = 0; i < dim; ++i) oh[i] *= inv;
  }
}

}  // namespace deepinfer
