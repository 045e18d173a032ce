// Weight-streaming linear layers: each weight row is dequantized once per call and applied to
// every batch row, so a batch of m rows reads the weights once. Threads split output columns.
#include "kernels/cpu/gemm.h"

#include <vector>

#include "core/check.h"
#include "kernels/cpu/vec.h"

namespace deepinfer::cpu {

void embed(const EmbedParams& p) {
  DI_CHECK(p.table != nullptr && p.ids != nullptr && p.y != nullptr);
  for (int64_t r = 0; r < p.m; ++r) {
    DI_CHECK(p.ids[r] >= 0 && p.ids[r] < p.table->n_out);
    dequant_row(*p.table, p.ids[r], p.y + r * p.table->n_in);
  }
}

void linear(const LinearParams& p) {
  if (p.m == 0) return;
  DI_CHECK(p.w != nullptr && p.x != nullptr && p.y != nullptr);
  DI_CHECK(p.ldx >= p.w->n_in && p.ldy >= p.w->n_out && p.m >= 0);
  DI_CHECK(p.w->dtype != DType::F8_E4M3 || p.w->scale_inv != nullptr);
  const LinearWeight& w = *p.w;
#pragma omp parallel
  {
    std::vector<float> row(size_t(w.n_in));
#pragma omp for schedule(static)
    for (int64_t o = 0; o < w.n_out; ++o) {
      dequant_row(w, o, row.data());
      for (int64_t r = 0; r < p.m; ++r) p.y[r * p.ldy + o] = dot(p.x + r * p.ldx, row.data(), w.n_in);
    }
  }
}

void mla_absorb_query(const MlaAbsorbQueryParams& p) {
  DI_CHECK(p.w_kv_b != nullptr && p.q != nullptr && p.q_latent != nullptr);
  const LinearWeight& w = *p.w_kv_b;
  DI_CHECK(w.n_out == int64_t(p.n_heads) * (p.qk_nope_head_dim + p.v_head_dim));
  const int64_t c = w.n_in;
  if (p.m == 0) return;
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(c));
#pragma omp for schedule(static)
    for (int h = 0; h < p.n_heads; ++h) {
      for (int64_t r = 0; r < p.m; ++r) std::fill_n(p.q_latent + (r * p.n_heads + h) * c, c, 0.0f);
      for (int d = 0; d < p.qk_nope_head_dim; ++d) {
        dequant_row(w, int64_t(h) * (p.qk_nope_head_dim + p.v_head_dim) + d, row.data());
        for (int64_t r = 0; r < p.m; ++r)
          axpy(p.q[r * p.ld_q + h * p.ld_q_head + d], row.data(), p.q_latent + (r * p.n_heads + h) * c, c);
      }
    }
  }
}

void mla_project_value(const MlaProjectValueParams& p) {
  DI_CHECK(p.w_kv_b != nullptr && p.o_latent != nullptr && p.out != nullptr);
  const LinearWeight& w = *p.w_kv_b;
  DI_CHECK(w.n_out == int64_t(p.n_heads) * (p.qk_nope_head_dim + p.v_head_dim));
  const int64_t c = w.n_in;
  if (p.m == 0) return;
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(c));
#pragma omp for schedule(static) collapse(2)
    for (int h = 0; h < p.n_heads; ++h) {
      for (int j = 0; j < p.v_head_dim; ++j) {
        dequant_row(w, int64_t(h) * (p.qk_nope_head_dim + p.v_head_dim) + p.qk_nope_head_dim + j, row.data());
        for (int64_t r = 0; r < p.m; ++r)
          p.out[r * p.n_heads * p.v_head_dim + h * p.v_head_dim + j] =
              dot(p.o_latent + (r * p.n_heads + h) * c, row.data(), c);
      }
    }
  }
}

}  // namespace deepinfer::cpu
