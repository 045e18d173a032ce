#include "model/deepseek_v4/compressor.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace deepinfer {

void compressor_token_inputs(Backend& backend, const CompressorWeights& w, const float* x, int64_t ldx, int64_t n,
                             const int32_t* positions, float* kv, float* score) {
  const int64_t width = int64_t(w.coff()) * w.dim;
  backend.linear({x, ldx, n, &w.wkv, kv, width});
  if (w.ratio == 1) return;  // no gate: the entry is the token's kv
  backend.linear({x, ldx, n, &w.wgate, score, width});
  if (w.ape.empty()) return;
  for (int64_t r = 0; r < n; ++r) {
    const float* ape = w.ape.data() + size_t(positions[r] % w.ratio) * size_t(width);
    for (int64_t i = 0; i < width; ++i) score[r * width + i] += ape[i];
  }
}

void compressor_pool(const CompressorWeights& w, const float* kv, const float* score, int n_prev, float* entry) {
  const int width = w.coff() * w.dim, n_tokens = n_prev + w.ratio;
  DI_CHECK(n_prev == 0 || (w.overlap && n_prev == w.ratio));
  if (w.ratio == 1) {
    std::copy_n(kv, w.dim, entry);
    return;
  }
  // Slot t of channel c reads column c of the previous window's tokens, and column
  // (coff - 1) * dim + c of the current window's.
  auto column = [&](int t, int c) { return t < n_prev ? c : (w.coff() - 1) * w.dim + c; };
  for (int c = 0; c < w.dim; ++c) {
    float mx = -INFINITY;
    for (int t = 0; t < n_tokens; ++t) mx = std::max(mx, score[t * width + column(t, c)]);
    float sum = 0, acc = 0;
    for (int t = 0; t < n_tokens; ++t) {
      const float e = std::exp(score[t * width + column(t, c)] - mx);
      sum += e;
      acc += e * kv[t * width + column(t, c)];
    }
    entry[c] = acc / sum;
  }
}

}  // namespace deepinfer
