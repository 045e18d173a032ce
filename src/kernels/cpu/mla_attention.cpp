// Paged MLA cache: storing rows' latents and attending over them. Each (row, head) pair is one
// task with a fixed order over positions, so results do not depend on batch composition.
#include "kernels/cpu/mla_attention.h"

#include <cmath>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/vec.h"

namespace deepinfer::cpu {
namespace {

// Reads one cached token: latent [kv_lora_rank] and k_pe [qk_rope_head_dim] as f32.
// For an F32 cache the returned pointers point into the cache and the buffers stay unused.
struct CacheEntryReader {
  const MlaCacheLayout& layout;
  std::vector<float> latent_buf, k_pe_buf;

  explicit CacheEntryReader(const MlaCacheLayout& l)
      : layout(l), latent_buf(size_t(l.kv_lora_rank)), k_pe_buf(size_t(l.qk_rope_head_dim)) {}

  void read(const uint8_t* entry, const float** latent, const float** k_pe) {
    const int c = layout.kv_lora_rank, r = layout.qk_rope_head_dim;
    switch (layout.dtype) {
      case DType::F32:
        *latent = reinterpret_cast<const float*>(entry);
        *k_pe = *latent + c;
        return;
      case DType::BF16: {
        const uint16_t* e = reinterpret_cast<const uint16_t*>(entry);
        for (int i = 0; i < c; ++i) latent_buf[i] = bf16_to_f32(e[i]);
        for (int i = 0; i < r; ++i) k_pe_buf[i] = bf16_to_f32(e[c + i]);
        break;
      }
      case DType::F8_E4M3: {
        const int group = MlaCacheLayout::kFp8GroupSize, n_groups = (c + group - 1) / group;
        const float* scales = reinterpret_cast<const float*>(entry + c);
        for (int i = 0; i < c; ++i) latent_buf[i] = fp8_e4m3_to_f32(entry[i]) * scales[i / group];
        const uint16_t* pe = reinterpret_cast<const uint16_t*>(entry + c + n_groups * 4);
        for (int i = 0; i < r; ++i) k_pe_buf[i] = bf16_to_f32(pe[i]);
        break;
      }
      default:
        DI_CHECK_MSG(false, "unsupported MLA cache dtype");
    }
    *latent = latent_buf.data();
    *k_pe = k_pe_buf.data();
  }
};

// For every batch row, the index of its sequence in batch.seqs.
std::vector<int> row_to_seq(const ForwardBatch& b) {
  std::vector<int> out(b.n_rows(), -1);
  for (size_t s = 0; s < b.seqs.size(); ++s)
    for (int32_t i = 0; i < b.seqs[s].n_new; ++i) out[size_t(b.seqs[s].row_begin + i)] = int(s);
  return out;
}

inline size_t slot_of(const BatchSequence& s, int32_t pos, int block_size) {
  return size_t(s.block_table[pos / block_size]) * size_t(block_size) + size_t(pos % block_size);
}

void check_batch(const ForwardBatch& b, int block_size) {
  DI_CHECK(b.positions.size() == b.n_rows() && block_size > 0);
  for (const auto& s : b.seqs) {
    DI_CHECK(s.n_new >= 1 && s.n_ctx >= s.n_new && s.block_table != nullptr);
    DI_CHECK(s.row_begin >= 0 && size_t(s.row_begin + s.n_new) <= b.n_rows());
  }
}

}  // namespace

void mla_kv_store(const MlaKvStoreParams& p) {
  DI_CHECK(p.batch && p.cache && p.latent && p.k_pe);
  check_batch(*p.batch, p.block_size);
  const ForwardBatch& b = *p.batch;
  const int c = p.layout.kv_lora_rank, r = p.layout.qk_rope_head_dim;
  const size_t bpt = p.layout.bytes_per_token();
  const std::vector<int> seq_of = row_to_seq(b);
#pragma omp parallel for schedule(static) if (b.n_rows() > 16)
  for (int64_t row = 0; row < int64_t(b.n_rows()); ++row) {
    DI_CHECK(seq_of[size_t(row)] >= 0);
    const BatchSequence& s = b.seqs[size_t(seq_of[size_t(row)])];
    uint8_t* entry = p.cache + slot_of(s, b.positions[size_t(row)], p.block_size) * bpt;
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
  check_batch(*p.batch, p.block_size);
  const ForwardBatch& b = *p.batch;
  const int c = p.layout.kv_lora_rank, r = p.layout.qk_rope_head_dim;
  const size_t bpt = p.layout.bytes_per_token();
  const std::vector<int> seq_of = row_to_seq(b);
  const int64_t n_tasks = int64_t(b.n_rows()) * p.n_heads;
#pragma omp parallel
  {
    CacheEntryReader reader(p.layout);
    std::vector<float> scores;
#pragma omp for schedule(dynamic, 4)
    for (int64_t task = 0; task < n_tasks; ++task) {
      const int64_t row = task / p.n_heads;
      const int h = int(task % p.n_heads);
      const BatchSequence& s = b.seqs[size_t(seq_of[size_t(row)])];
      const int32_t n_keys = b.positions[size_t(row)] + 1;  // causal: positions [0, own]
      const float* ql = p.q_latent + (row * p.n_heads + h) * c;
      const float* qp = p.q_pe + row * p.ld_q_pe_row + h * p.ld_q_pe_head;
      scores.resize(size_t(n_keys));
      float max_score = -INFINITY;
      for (int32_t t = 0; t < n_keys; ++t) {
        const float *lat, *pe;
        reader.read(p.cache + slot_of(s, t, p.block_size) * bpt, &lat, &pe);
        scores[size_t(t)] = (dot(ql, lat, c) + dot(qp, pe, r)) * p.softmax_scale;
        max_score = std::max(max_score, scores[size_t(t)]);
      }
      float sum = 0.0f;
      for (int32_t t = 0; t < n_keys; ++t) {
        scores[size_t(t)] = std::exp(scores[size_t(t)] - max_score);
        sum += scores[size_t(t)];
      }
      float* out = p.out_latent + (row * p.n_heads + h) * c;
      std::fill_n(out, c, 0.0f);
      const float inv_sum = 1.0f / sum;
      for (int32_t t = 0; t < n_keys; ++t) {
        const float *lat, *pe;
        reader.read(p.cache + slot_of(s, t, p.block_size) * bpt, &lat, &pe);
        axpy(scores[size_t(t)] * inv_sum, lat, out, c);
      }
    }
  }
}

}  // namespace deepinfer::cpu
