#include "model/deepseek_v4/sink_attention.h"

#include <algorithm>
#include <cmath>

namespace deepinfer {

void sink_attention(Backend& backend, const float* q, int n_heads, int dim, const float* keys, int n_keys,
                    const float* sink, float scale, float* out, std::vector<float>& scores) {
  scores.resize(size_t(n_heads) * size_t(n_keys));
  const LinearWeight key_matrix{DType::F32, keys, n_keys, dim, nullptr, 128, 128};
  backend.linear({q, dim, n_heads, &key_matrix, scores.data(), n_keys});  // [n_heads, n_keys]
  for (int h = 0; h < n_heads; ++h) {
    float* s = scores.data() + size_t(h) * size_t(n_keys);
    float mx = sink[h];
    for (int t = 0; t < n_keys; ++t) mx = std::max(mx, s[t] *= scale);
    float sum = std::exp(sink[h] - mx);
    float* oh = out + size_t(h) * size_t(dim);
    std::fill_n(oh, dim, 0.0f);
    for (int t = 0; t < n_keys; ++t) {
      const float p = std::exp(s[t] - mx);
      sum += p;
      const float* k = keys + size_t(t) * size_t(dim);
      for (int i = 0; i < dim; ++i) oh[i] += p * k[i];
    }
    const float inv = 1.0f / sum;
    for (int i = 0; i < dim; ++i) oh[i] *= inv;
  }
}

}  // namespace deepinfer
