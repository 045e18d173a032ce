// Manifold-constrained hyper-connections (DeepSeek-V4, reused by V4.1): the residual stream is
// hc_mult copies of the hidden state. Before a sublayer, hc_pre mixes the streams into its input
// and yields the Sinkhorn-normalized matrix that hc_post uses to remix them around its output;
// hc_head collapses the streams before the final norm.
//
// Per row, with x = the hc streams flattened [hc * hidden] and r = rsqrt(mean(x^2) + norm_eps):
//   mixes = (x . fn^T) * r
//   pre   = sigmoid(mixes[0:hc] * scale[0] + base[0:hc]) + hc_eps
//   post  = 2 * sigmoid(mixes[hc:2hc] * scale[1] + base[hc:2hc])
//   comb  = softmax_rows(mixes[2hc:] * scale[2] + base[2hc:]) + hc_eps  as [hc, hc] row-major,
//           then columns normalized, then sinkhorn_iters - 1 times rows then columns (+ hc_eps)
//   input = sum_j pre[j] * stream[j];  new stream k = post[k] * out + sum_j comb[j][k] * stream[j]
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.h"

namespace deepinfer {

struct HyperConnectionWeights {
  LinearWeight fn;          // F32 [(2 + hc) * hc, hc * hidden] (a block) or [hc, hc * hidden] (the head)
  std::vector<float> base;  // [fn.n_out]
  std::vector<float> scale; // [3] (a block) or [1] (the head)
};

struct HyperConnectionDims {
  int hc = 1;               // hc_mult
  int64_t hidden = 0;
  int sinkhorn_iters = 1;
  float hc_eps = 1e-6f;
  float norm_eps = 1e-6f;
};

// streams: [n, hc, hidden]. Writes pre [n, hc], post [n, hc], comb [n, hc, hc] (comb[j][k]).
// `mixes`: scratch of at least n * fn.n_out floats.
void hc_mix(Backend& backend, const HyperConnectionWeights& w, const HyperConnectionDims& d, const float* streams,
            int64_t n, float* pre, float* post, float* comb, float* mixes);

// y [n, hidden] = sum_j pre[r, j] * streams[r, j] (pre [n, hc], streams [n, hc, hidden]).
void hc_collapse(const HyperConnectionDims& d, const float* pre, const float* streams, int64_t n, float* y);

// hc_mix, then hc_collapse with that site's own pre (V4; V4.1's single pass collapses a site's
// input with the previous site's pre): y [n, hidden], post, comb as hc_mix.
void hc_pre(Backend& backend, const HyperConnectionWeights& w, const HyperConnectionDims& d, const float* streams,
            int64_t n, float* y, float* post, float* comb, float* mixes);

// streams [n, hc, hidden] in place: stream k <- post[k] * out + sum_j comb[j][k] * stream[j].
void hc_post(const HyperConnectionDims& d, const float* out, const float* post, const float* comb, int64_t n,
             float* streams);

// The head's collapse, for the rows listed: y[i] = sum_j pre[j] * streams[rows[i], j], with
// pre = sigmoid(mixes * scale[0] + base) + hc_eps (no Sinkhorn). `mixes`: scratch [n_rows * hc].
void hc_head(Backend& backend, const HyperConnectionWeights& w, const HyperConnectionDims& d, const float* streams,
             const int32_t* rows, int64_t n_rows, float* y, float* mixes);

}  // namespace deepinfer
