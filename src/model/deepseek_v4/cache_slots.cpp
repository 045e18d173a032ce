#include "model/deepseek_v4/cache_slots.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/dtype.h"

namespace deepinfer {
namespace {

int aligned(int n) { return (n + V4CacheSlots::kRegionAlign - 1) / V4CacheSlots::kRegionAlign * V4CacheSlots::kRegionAlign; }

size_t n_scale_groups(const MlaCacheLayout& l) {
  return size_t((l.kv_lora_rank + MlaCacheLayout::kFp8GroupSize - 1) / MlaCacheLayout::kFp8GroupSize);
}

}  // namespace

V4CacheSlots V4CacheSlots::make(const std::vector<int>& compress_ratios, int head_dim, int rope_dim,
                                int index_head_dim) {
  V4CacheSlots s;
  s.rope_dim = rope_dim;
  for (int ratio : compress_ratios) {
    V4LayerSlots l;
    int end = aligned(head_dim - rope_dim);
    auto take = [&](int n) {
      const int at = end;
      end += aligned(n);
      return at;
    };
    if (ratio > 0) {
      const int coff = ratio == 4 ? 2 : 1;
      l.comp_kv = take(coff * head_dim);
      l.comp_score = take(coff * head_dim);
      l.comp_entry = take(head_dim);
    }
    if (ratio == 4) {
      l.idx_kv = take(2 * index_head_dim);
      l.idx_score = take(2 * index_head_dim);
      l.idx_key = take(index_head_dim);
    }
    s.latent_width = std::max(s.latent_width, end);
    s.layers.push_back(l);
  }
  return s;
}

V4CompactKvBytes v4_compact_kv_bytes(const std::vector<int>& compress_ratios, int head_dim, int rope_dim,
                                     int index_head_dim, int sliding_window, bool fp8) {
  const int nope = head_dim - rope_dim;
  const size_t entry = fp8 ? size_t(nope + (nope + 63) / 64 + rope_dim * 2) : size_t(head_dim) * 2;
  const size_t key = fp8 ? size_t(index_head_dim / 2 + (index_head_dim + 31) / 32) : size_t(index_head_dim) * 2;
  V4CompactKvBytes b;
  for (int ratio : compress_ratios) {
    b.per_sequence += size_t(sliding_window) * entry;
    if (ratio > 0) b.per_token += double(entry) / ratio;
    if (ratio == 4) b.per_token += double(key) / 4;
  }
  return b;
}

void store_latent(uint8_t* entry, const MlaCacheLayout& layout, int offset, const float* src, int n) {
  DI_CHECK(offset >= 0 && offset + n <= layout.kv_lora_rank);
  switch (layout.dtype) {
    case DType::F32:
      std::copy_n(src, n, reinterpret_cast<float*>(entry) + offset);
      break;
    case DType::BF16: {
      uint16_t* e = reinterpret_cast<uint16_t*>(entry) + offset;
      for (int i = 0; i < n; ++i) e[i] = f32_to_bf16(src[i]);
      break;
    }
    case DType::F8_E4M3: {
      const int group = MlaCacheLayout::kFp8GroupSize;
      DI_CHECK(offset % group == 0);
      float* scales = reinterpret_cast<float*>(entry + layout.kv_lora_rank);
      for (int begin = 0; begin < n; begin += group) {
        const int end = std::min(n, begin + group);
        float amax = 0.0f;
        for (int i = begin; i < end; ++i) amax = std::max(amax, std::fabs(src[i]));
        const float scale = amax / 448.0f;
        scales[(offset + begin) / group] = scale;
        for (int i = begin; i < end; ++i) entry[offset + i] = scale > 0 ? f32_to_fp8_e4m3(src[i] / scale) : 0;
      }
      break;
    }
    default:
      DI_CHECK_MSG(false, "unsupported DeepSeek-V4 cache dtype");
  }
}

void load_latent(const uint8_t* entry, const MlaCacheLayout& layout, int offset, float* dst, int n) {
  DI_CHECK(offset >= 0 && offset + n <= layout.kv_lora_rank);
  switch (layout.dtype) {
    case DType::F32:
      std::copy_n(reinterpret_cast<const float*>(entry) + offset, n, dst);
      break;
    case DType::BF16: {
      const uint16_t* e = reinterpret_cast<const uint16_t*>(entry) + offset;
      for (int i = 0; i < n; ++i) dst[i] = bf16_to_f32(e[i]);
      break;
    }
    case DType::F8_E4M3: {
      const int group = MlaCacheLayout::kFp8GroupSize;
      const float* scales = reinterpret_cast<const float*>(entry + layout.kv_lora_rank);
      for (int i = 0; i < n; ++i) dst[i] = fp8_e4m3_to_f32(entry[offset + i]) * scales[(offset + i) / group];
      break;
    }
    default:
      DI_CHECK_MSG(false, "unsupported DeepSeek-V4 cache dtype");
  }
}

void store_rope(uint8_t* entry, const MlaCacheLayout& layout, const float* src) {
  const int r = layout.qk_rope_head_dim, c = layout.kv_lora_rank;
  switch (layout.dtype) {
    case DType::F32:
      std::copy_n(src, r, reinterpret_cast<float*>(entry) + c);
      break;
    case DType::BF16: {
      uint16_t* e = reinterpret_cast<uint16_t*>(entry) + c;
      for (int i = 0; i < r; ++i) e[i] = f32_to_bf16(src[i]);
      break;
    }
    case DType::F8_E4M3: {
      uint16_t* e = reinterpret_cast<uint16_t*>(entry + c + n_scale_groups(layout) * 4);
      for (int i = 0; i < r; ++i) e[i] = f32_to_bf16(src[i]);
      break;
    }
    default:
      DI_CHECK_MSG(false, "unsupported DeepSeek-V4 cache dtype");
  }
}

void load_rope(const uint8_t* entry, const MlaCacheLayout& layout, float* dst) {
  const int r = layout.qk_rope_head_dim, c = layout.kv_lora_rank;
  switch (layout.dtype) {
    case DType::F32:
      std::copy_n(reinterpret_cast<const float*>(entry) + c, r, dst);
      break;
    case DType::BF16: {
      const uint16_t* e = reinterpret_cast<const uint16_t*>(entry) + c;
      for (int i = 0; i < r; ++i) dst[i] = bf16_to_f32(e[i]);
      break;
    }
    case DType::F8_E4M3: {
      const uint16_t* e = reinterpret_cast<const uint16_t*>(entry + c + n_scale_groups(layout) * 4);
      for (int i = 0; i < r; ++i) dst[i] = bf16_to_f32(e[i]);
      break;
    }
    default:
      DI_CHECK_MSG(false, "unsupported DeepSeek-V4 cache dtype");
  }
}

}  // namespace deepinfer
