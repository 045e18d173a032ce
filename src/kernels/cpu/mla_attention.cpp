// Paged MLA cache: storing rows' latents, and the attention driver. Each task is one row and a
// group of its heads (mla_attention_kernels.h; mla_attention_amx.h on the amx level's bf16 dots),
// whose arithmetic depends only on the row itself.
#include "kernels/cpu/mla_attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/kernel_table.h"

namespace deepinfer::cpu {
namespace {

// For every batch row, the index of its sequence in batch.seqs.
std::vector<int> row_to_seq(const ForwardBatch& b) {
  std::vector<int> out(b.n_rows(), -1);
  for (size_t s = 0; s < b.seqs.size(); ++s)
    for (int32_t i = 0; i < b.seqs[s].n_new; ++i) out[size_t(b.seqs[s].row_begin + i)] = int(s);
  return out;
}

inline size_t slot_of(const int32_t* table, int32_t pos, int block_size) {
  return size_t(table[pos / block_size]) * size_t(block_size) + size_t(pos % block_size);
}

void check_batch(const ForwardBatch& b, int block_size, int kind) {
  DI_CHECK(b.positions.size() == b.n_rows() && block_size > 0 && kind >= 0 && kind < kMaxKvKinds);
  for (const auto& s : b.seqs) {
    DI_CHECK(s.n_new >= 1 && s.n_ctx >= s.n_new && s.block_tables[size_t(kind)] != nullptr);
    DI_CHECK(s.row_begin >= 0 && size_t(s.row_begin + s.n_new) <= b.n_rows());
  }
}

}  // namespace

void mla_kv_store(const MlaKvStoreParams& p) {
  DI_CHECK(p.batch && p.cache && p.latent && p.k_pe);
  check_batch(*p.batch, p.block_size, p.kind);
  const ForwardBatch& b = *p.batch;
  const int c = p.layout.kv_lora_rank, r = p.layout.qk_rope_head_dim;
  const size_t bpt = p.layout.bytes_per_token();
  const std::vector<int> seq_of = row_to_seq(b);
#pragma omp parallel for schedule(static) if (b.n_rows() > 16)
  for (int64_t row = 0; row < int64_t(b.n_rows()); ++row) {
    DI_CHECK(seq_of[size_t(row)] >= 0);
    const BatchSequence& s = b.seqs[size_t(seq_of[size_t(row)])];
    uint8_t* entry = p.cache + slot_of(s.block_tables[size_t(p.kind)], b.positions[size_t(row)], p.block_size) * bpt;
    const float* lat = p.latent + row * p.ld_latent;
    const float* pe = p.k_pe + row * p.ld_k_pe;
    switch (p.layout.dtype) {
      case DType::F32: {
        float* e = reinterpret_cast<float*>(entry);
        std::copy_n(lat, c, e);
        std::copy_n(pe, r, e + c);
        break;
      }
      case DType::BF16: {
        uint16_t* e = reinterpret_cast<uint16_t*>(entry);
        for (int i = 0; i < c; ++i) e[i] = f32_to_bf16(lat[i]);
        for (int i = 0; i < r; ++i) e[c + i] = f32_to_bf16(pe[i]);
        break;
      }
      case DType::F8_E4M3: {
        const int group = MlaCacheLayout::kFp8GroupSize, n_groups = (c + group - 1) / group;
        float* scales = reinterpret_cast<float*>(entry + c);
        for (int g = 0; g < n_groups; ++g) {
          const int begin = g * group, end = std::min(c, begin + group);
          float amax = 0.0f;
          for (int i = begin; i < end; ++i) amax = std::max(amax, std::fabs(lat[i]));
          const float scale = amax / 448.0f;
          scales[g] = scale;
          for (int i = begin; i < end; ++i) entry[i] = scale > 0 ? f32_to_fp8_e4m3(lat[i] / scale) : 0;
        }
        uint16_t* e = reinterpret_cast<uint16_t*>(entry + c + n_groups * 4);
        for (int i = 0; i < r; ++i) e[i] = f32_to_bf16(pe[i]);
        break;
      }
      default:
        DI_CHECK_MSG(false, "unsupported MLA cache dtype");
    }
  }
}

void mla_attention(const MlaAttentionParams& p) {
  DI_CHECK(p.batch && p.cache && p.q_latent && p.q_pe && p.out_latent && p.n_heads > 0);
  check_batch(*p.batch, p.block_size, p.kind);
  DI_CHECK(p.layout.dtype == DType::F32 || p.layout.dtype == DType::BF16 || p.layout.dtype == DType::F8_E4M3);
  DI_CHECK_MSG(p.dot_dtype == DType::F32 ||
                   (p.dot_dtype == DType::BF16 && (p.layout.dtype == DType::BF16 || p.layout.dtype == DType::F8_E4M3)),
               "bf16 attention dots need a bf16 or fp8 cache");
  const ForwardBatch& b = *p.batch;
  const int64_t n_rows = int64_t(b.n_rows());
  if (n_rows == 0) return;
  thread_local std::vector<int> seq_of_rows;
  seq_of_rows = row_to_seq(b);
  const int* seq_of = seq_of_rows.data();  // per thread: workers use the caller's
  // Few rows: split heads into groups so that every thread has work (results do not depend on it),
  // in whole head tiles where the level runs bf16 dots on tiles. Each group reads (and packs) its
  // row's keys once more, which costs about as much as 2 heads' arithmetic: the number of groups
  // minimizes the busiest thread's share, (tasks per thread) x (heads per group + 2).
  const KernelTable& k = kernels();
  const int quantum = p.dot_dtype == DType::BF16 ? k.attend_head_tile : 1;
  const int64_t threads = omp_get_max_threads();
  auto heads_per_group = [&](int g) { return ((p.n_heads + g - 1) / g + quantum - 1) / quantum * quantum; };
  auto busiest = [&](int g) { return (n_rows * g + threads - 1) / threads * (heads_per_group(g) + 2); };
  int n_groups = 1;
  for (int g = 2; g * quantum <= p.n_heads; g *= 2)
    if (busiest(g) < busiest(n_groups)) n_groups = g;
  const int per_group = heads_per_group(n_groups);
#pragma omp parallel
  {
    thread_local AttendScratch scratch;
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < n_rows * n_groups; ++task) {
      const int64_t row = task / n_groups;
      const int h0 = int(task % n_groups) * per_group, h1 = std::min(p.n_heads, h0 + per_group);
      if (h0 < h1) k.mla_attend_row(p, b.seqs[size_t(seq_of[row])], row, h0, h1, scratch);
    }
  }
}

}  // namespace deepinfer::cpu
