// Expanded MLA attention driver: per sequence, its positions in chunks of kExpandKeys; each
// chunk's latents widened to f32 and expanded by one GEMM (cpu::linear, batch-invariant per row,
// so a position's K/V never depends on the chunk it falls in), then the per-ISA kernel
// (mla_expanded_attention_kernels.h) updates the rows' online softmax over it.
#include "kernels/cpu/mla_expanded_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/aligned_vector.h"
#include "core/check.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel_table.h"

namespace deepinfer::cpu {
namespace {

// Positions per expansion GEMM: a multiple of kAttendKeyBlock; bounds the chunk's K/V memory
// ([kExpandKeys, n_heads * (qk_nope + v)] f32), not the results.
constexpr int kExpandKeys = 4 * kAttendKeyBlock;

// latents[t] (kv_lora_rank) and k_pe[t] (rope) of positions [t0, t0 + n) as f32.
void widen_entries(const MlaExpandedAttentionParams& p, const BatchSequence& s, int32_t t0, int n, float* latents,
                   float* k_pe) {
  const int c = p.layout.kv_lora_rank, rd = p.layout.qk_rope_head_dim;
  const size_t bpt = p.layout.bytes_per_token();
#pragma omp parallel for schedule(static) if (n >= 64)
  for (int t = 0; t < n; ++t) {
    const int32_t pos = t0 + t;
    const uint8_t* e = p.cache + (size_t(s.block_tables[size_t(p.kind)][pos / p.block_size]) * size_t(p.block_size) +
                                  size_t(pos % p.block_size)) * bpt;
    float* lat = latents + size_t(t) * c;
    float* pe = k_pe + size_t(t) * rd;
    switch (p.layout.dtype) {
      case DType::F32: {
        const float* f = reinterpret_cast<const float*>(e);
        std::copy_n(f, c, lat);
        std::copy_n(f + c, rd, pe);
        break;
      }
      case DType::BF16: {
        const uint16_t* b = reinterpret_cast<const uint16_t*>(e);
        for (int i = 0; i < c; ++i) lat[i] = bf16_to_f32(b[i]);
        for (int i = 0; i < rd; ++i) pe[i] = bf16_to_f32(b[c + i]);
        break;
      }
      default: {  // F8_E4M3: groups of e4m3 with f32 scales, then the bf16 rope part
        const int group = MlaCacheLayout::kFp8GroupSize, n_groups = (c + group - 1) / group;
        const float* scales = reinterpret_cast<const float*>(e + c);
        for (int i = 0; i < c; ++i) lat[i] = fp8_e4m3_to_f32(e[i]) * scales[i / group];
        const uint16_t* b = reinterpret_cast<const uint16_t*>(e + c + n_groups * 4);
        for (int i = 0; i < rd; ++i) pe[i] = bf16_to_f32(b[i]);
      }
    }
  }
}

}  // namespace

void mla_expanded_attention(const MlaExpandedAttentionParams& p) {
  DI_CHECK(p.batch && p.cache && p.q && p.out && p.w_kv_b && p.n_heads > 0);
  DI_CHECK(p.qk_nope_head_dim > 0 && p.v_head_dim > 0 && p.ld_out >= int64_t(p.n_heads) * p.v_head_dim);
  DI_CHECK(p.ld_q_head >= p.qk_nope_head_dim + p.layout.qk_rope_head_dim && p.ld_q >= p.n_heads * p.ld_q_head);
  DI_CHECK(p.w_kv_b->n_out == int64_t(p.n_heads) * (p.qk_nope_head_dim + p.v_head_dim) &&
           p.w_kv_b->n_in == p.layout.kv_lora_rank);
  DI_CHECK(p.layout.dtype == DType::F32 || p.layout.dtype == DType::BF16 || p.layout.dtype == DType::F8_E4M3);
  DI_CHECK_MSG(p.dot_dtype == DType::F32 ||
                   (p.dot_dtype == DType::BF16 && (p.layout.dtype == DType::BF16 || p.layout.dtype == DType::F8_E4M3)),
               "bf16 expanded attention needs a bf16 or fp8 cache");
  const ForwardBatch& b = *p.batch;
  DI_CHECK(b.positions.size() == b.n_rows() && p.block_size > 0 && p.kind >= 0 && p.kind < kMaxKvKinds);
  for (const BatchSequence& s : b.seqs) {
    DI_CHECK(s.n_new >= 1 && s.n_ctx >= s.n_new && s.block_tables[size_t(p.kind)] != nullptr);
    DI_CHECK(s.row_begin >= 0 && size_t(s.row_begin + s.n_new) <= b.n_rows());
    for (int i = 0; i < s.n_new; ++i) DI_CHECK(b.positions[size_t(s.row_begin + i)] == s.n_ctx - s.n_new + i);
  }
  const int H = p.n_heads, dv = p.v_head_dim;
  const int c = p.layout.kv_lora_rank, rd = p.layout.qk_rope_head_dim;
  LinearWeight w = *p.w_kv_b;
  w.act_dtype = p.dot_dtype == DType::BF16 && admits_bf16_activations(w) ? DType::BF16 : DType::F32;

  thread_local ExpandedState state;  // the caller's, shared with the OpenMP threads by reference
  ExpandedState& st = state;
  thread_local AlignedVector<float> latents, k_pe, kv;
  latents.resize(size_t(kExpandKeys) * c);
  k_pe.resize(size_t(kExpandKeys) * rd);
  kv.resize(size_t(kExpandKeys) * size_t(w.n_out));
  const KernelTable& k = kernels();
  for (const BatchSequence& s : b.seqs) {
    st.n_rows = s.n_new;
    st.run_max.assign(size_t(s.n_new) * H, -INFINITY);
    st.run_sum.assign(size_t(s.n_new) * H, 0.0f);
    st.acc.assign(size_t(s.n_new) * H * dv, 0.0f);
    for (int32_t t0 = 0; t0 < s.n_ctx; t0 += kExpandKeys) {
      const int n = std::min(kExpandKeys, s.n_ctx - t0);
      widen_entries(p, s, t0, n, latents.data(), k_pe.data());
      linear({latents.data(), c, n, &w, kv.data(), w.n_out});
      k.mla_expanded_attend_chunk({&p, &s, t0, n, kv.data(), k_pe.data(), &st});
    }
#pragma omp parallel for schedule(static) if (s.n_new >= 16)
    for (int r = 0; r < s.n_new; ++r)
      for (int h = 0; h < H; ++h) {
        const float inv = 1.0f / st.run_sum[size_t(r) * H + h];
        const float* a = st.acc.data() + (size_t(r) * H + h) * dv;
        float* o = p.out + (s.row_begin + r) * p.ld_out + int64_t(h) * dv;
        for (int j = 0; j < dv; ++j) o[j] = a[j] * inv;
      }
  }
}

}  // namespace deepinfer::cpu
