#include "model/deepseek_v4/hyper_connection.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace deepinfer {
namespace {

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// mixes[r] = (x_r . fn^T) * rsqrt(mean(x_r^2) + eps) for each row of x [m, hc * hidden].
void compute_mixes(Backend& backend, const HyperConnectionWeights& w, const HyperConnectionDims& d, const float* x,
                   int64_t m, float* mixes) {
  const int64_t width = int64_t(d.hc) * d.hidden, n_mix = w.fn.n_out;
  backend.linear({x, width, m, &w.fn, mixes, n_mix});
  // Each row's sum of squares in index order, a chain of dependent additions; four rows at a time
  // keep four chains in flight (each row's order, hence its bits, unchanged).
  constexpr int64_t kRows = 4;
#pragma omp parallel for if (m > 1)
  for (int64_t r0 = 0; r0 < m; r0 += kRows) {
    const int64_t nr = std::min(kRows, m - r0);
    float sum_sq[kRows] = {};
    if (nr == kRows) {
      const float *x0 = x + r0 * width, *x1 = x0 + width, *x2 = x1 + width, *x3 = x2 + width;
      for (int64_t i = 0; i < width; ++i) {
        sum_sq[0] += x0[i] * x0[i];
        sum_sq[1] += x1[i] * x1[i];
        sum_sq[2] += x2[i] * x2[i];
        sum_sq[3] += x3[i] * x3[i];
      }
    } else {
      for (int64_t j = 0; j < nr; ++j) {
        const float* xr = x + (r0 + j) * width;
        for (int64_t i = 0; i < width; ++i) sum_sq[j] += xr[i] * xr[i];
      }
    }
    for (int64_t j = 0; j < nr; ++j) {
      const float inv = 1.0f / std::sqrt(sum_sq[j] / float(width) + d.norm_eps);
      for (int64_t i = 0; i < n_mix; ++i) mixes[(r0 + j) * n_mix + i] *= inv;
    }
  }
}

void sinkhorn(const HyperConnectionDims& d, float* c) {  // c: [hc, hc] logits -> doubly normalized
  const int hc = d.hc;
  for (int j = 0; j < hc; ++j) {
    float* row = c + j * hc;
    float mx = row[0];
    for (int k = 1; k < hc; ++k) mx = std::max(mx, row[k]);
    float sum = 0;
    for (int k = 0; k < hc; ++k) sum += (row[k] = std::exp(row[k] - mx));
    for (int k = 0; k < hc; ++k) row[k] = row[k] / sum + d.hc_eps;
  }
  auto normalize_columns = [&] {
    for (int k = 0; k < hc; ++k) {
      float sum = 0;
      for (int j = 0; j < hc; ++j) sum += c[j * hc + k];
      for (int j = 0; j < hc; ++j) c[j * hc + k] /= sum + d.hc_eps;
    }
  };
  normalize_columns();
  for (int it = 1; it < d.sinkhorn_iters; ++it) {
    for (int j = 0; j < hc; ++j) {
      float sum = 0;
      for (int k = 0; k < hc; ++k) sum += c[j * hc + k];
      for (int k = 0; k < hc; ++k) c[j * hc + k] /= sum + d.hc_eps;
    }
    normalize_columns();
  }
}

}  // namespace

void hc_mix(Backend& backend, const HyperConnectionWeights& w, const HyperConnectionDims& d, const float* streams,
            int64_t n, float* pre, float* post, float* comb, float* mixes) {
  const int hc = d.hc;
  DI_CHECK(w.fn.n_out == int64_t(2 + hc) * hc && w.scale.size() == 3);
  compute_mixes(backend, w, d, streams, n, mixes);
  const int64_t n_mix = w.fn.n_out;
#pragma omp parallel for if (n > 1)
  for (int64_t r = 0; r < n; ++r) {
    const float* m = mixes + r * n_mix;
    for (int j = 0; j < hc; ++j) pre[r * hc + j] = sigmoid(m[j] * w.scale[0] + w.base[size_t(j)]) + d.hc_eps;
    for (int j = 0; j < hc; ++j) post[r * hc + j] = 2.0f * sigmoid(m[hc + j] * w.scale[1] + w.base[size_t(hc + j)]);
    float* c = comb + r * hc * hc;
    for (int i = 0; i < hc * hc; ++i) c[i] = m[2 * hc + i] * w.scale[2] + w.base[size_t(2 * hc + i)];
    sinkhorn(d, c);
  }
}

void hc_collapse(const HyperConnectionDims& d, const float* pre, const float* streams, int64_t n, float* y) {
  const int hc = d.hc;
#pragma omp parallel for if (n > 1)
  for (int64_t r = 0; r < n; ++r) {
    const float* s = streams + r * hc * d.hidden;
    const float* pr = pre + r * hc;
    float* yr = y + r * d.hidden;
    // yr[i] = ((0 + pr[0] s[0][i]) + pr[1] s[1][i]) + ..., a stream at a time so that it vectorizes.
    std::fill_n(yr, d.hidden, 0.0f);
    for (int j = 0; j < hc; ++j) {
      const float pj = pr[j], *sj = s + j * d.hidden;
#pragma omp simd
      for (int64_t i = 0; i < d.hidden; ++i) yr[i] += pj * sj[i];
    }
  }
}

void hc_pre(Backend& backend, const HyperConnectionWeights& w, const HyperConnectionDims& d, const float* streams,
            int64_t n, float* y, float* post, float* comb, float* mixes) {
  std::vector<float> pre(size_t(n * d.hc));
  hc_mix(backend, w, d, streams, n, pre.data(), post, comb, mixes);
  hc_collapse(d, pre.data(), streams, n, y);
}

void hc_post(const HyperConnectionDims& d, const float* out, const float* post, const float* comb, int64_t n,
             float* streams) {
  const int hc = d.hc;
#pragma omp parallel if (n > 1)
  {
    std::vector<float> old(size_t(hc * d.hidden));
#pragma omp for
    for (int64_t r = 0; r < n; ++r) {
      float* s = streams + r * hc * d.hidden;
      std::copy(s, s + hc * d.hidden, old.begin());
      const float* c = comb + r * hc * hc;
      const float* o = out + r * d.hidden;
      // sk[i] = ((pk o[i] + c[0][k] old[0][i]) + c[1][k] old[1][i]) + ..., a stream at a time.
      for (int k = 0; k < hc; ++k) {
        const float pk = post[r * hc + k];
        float* sk = s + k * d.hidden;
#pragma omp simd
        for (int64_t i = 0; i < d.hidden; ++i) sk[i] = pk * o[i];
        for (int j = 0; j < hc; ++j) {
          const float cjk = c[j * hc + k], *oj = old.data() + j * d.hidden;
#pragma omp simd
          for (int64_t i = 0; i < d.hidden; ++i) sk[i] += cjk * oj[i];
        }
      }
    }
  }
}

void hc_head(Backend& backend, const HyperConnectionWeights& w, const HyperConnectionDims& d, const float* streams,
             const int32_t* rows, int64_t n_rows, float* y, float* mixes) {
  const int hc = d.hc;
  DI_CHECK(w.fn.n_out == hc && w.scale.size() == 1);
  const int64_t width = int64_t(hc) * d.hidden;
  for (int64_t i = 0; i < n_rows; ++i) {
    const float* s = streams + int64_t(rows[i]) * width;
    compute_mixes(backend, w, d, s, 1, mixes + i * hc);
    float* yr = y + i * d.hidden;
    float pre[64];
    DI_CHECK(hc <= 64);
    for (int j = 0; j < hc; ++j) pre[j] = sigmoid(mixes[i * hc + j] * w.scale[0] + w.base[size_t(j)]) + d.hc_eps;
    for (int64_t c = 0; c < d.hidden; ++c) {
      float acc = 0;
      for (int j = 0; j < hc; ++j) acc += pre[j] * s[j * d.hidden + c];
      yr[c] = acc;
    }
  }
}

}  // namespace deepinfer
