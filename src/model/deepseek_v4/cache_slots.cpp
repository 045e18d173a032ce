#include "model/deepseek_v4/cache_slots.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
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

Result<V4CacheSlots> V4CacheSlots::make(const std::vector<int>& compress_ratios, int head_dim, int rope_dim,
                                        int index_head_dim, int sliding_window, DType dtype, int block_size,
                                        int mtp_streams_width) {
  if (dtype != DType::F32 && dtype != DType::BF16 && dtype != DType::F8_E4M3)
    return Status::Error("the DeepSeek-V4 cache is f32, bf16 or fp8, not " + std::string(dtype_name(dtype)));
  V4CacheSlots s;
  s.block_size = block_size;
  // The window kind of a lookback, made on first use.
  auto window_kind = [&](int lookback, size_t entry_bytes) {
    size_t k = 0;
    while (k < s.kinds.size() && s.kinds[k].lookback != lookback) ++k;
    if (k == s.kinds.size()) s.kinds.push_back({"window " + std::to_string(lookback + 1), 1, 0, lookback});
    const size_t offset = s.kinds[k].bytes_per_block;
    s.kinds[k].bytes_per_block += size_t(block_size) * entry_bytes;
    return std::pair<int, size_t>{int(k), offset};
  };
  size_t compressed_bytes = 0;
  for (int ratio : compress_ratios) {
    if (ratio > 0 && block_size % ratio != 0 && ratio % block_size != 0) {
      return Status::Error("block size " + std::to_string(block_size) + " is neither a multiple nor a divisor of the "
                           "compress ratio " + std::to_string(ratio) + " (use a power of two)");
    }
    V4LayerSlots l;
    l.ratio = ratio;
    l.kv = {dtype, aligned(head_dim - rope_dim), rope_dim};
    std::tie(l.kv_kind, l.kv_offset) = window_kind(std::max(1, sliding_window - 1), l.kv.bytes_per_token());
    if (ratio > 0) {
      const int coff = ratio == 4 ? 2 : 1;
      int end = 0;
      auto take = [&](int n) {
        const int at = end;
        end += aligned(n);
        return at;
      };
      l.comp_kv = take(coff * head_dim);
      l.comp_score = take(coff * head_dim);
      if (ratio == 4) {
        l.idx_kv = take(2 * index_head_dim);
        l.idx_score = take(2 * index_head_dim);
      }
      l.inputs = {dtype, end, 0};
      std::tie(l.inputs_kind, l.inputs_offset) = window_kind(coff * ratio - 1, l.inputs.bytes_per_token());
      l.entry = {dtype, head_dim - rope_dim, rope_dim};
      l.slots_per_block = std::max(1, block_size / ratio);
      l.entry_offset = compressed_bytes;
      compressed_bytes += size_t(l.slots_per_block) * l.entry.bytes_per_token();
    }
    if (ratio == 4) {
      l.key = {dtype, index_head_dim, 0};
      l.key_offset = compressed_bytes;
      compressed_bytes += size_t(l.slots_per_block) * l.key.bytes_per_token();
    }
    s.layers.push_back(l);
  }
  if (compressed_bytes > 0) {
    s.compressed_kind = int(s.kinds.size());
    s.kinds.push_back({"compressed", 1, compressed_bytes, 0});
  }
  if (mtp_streams_width > 0) {
    s.mtp_kv = {dtype, aligned(head_dim - rope_dim), rope_dim};
    s.mtp_kv_kind = int(s.kinds.size());
    const int window = std::max(1, sliding_window - 1);
    s.kinds.push_back({"mtp window " + std::to_string(window + 1), 1, size_t(block_size) * s.mtp_kv.bytes_per_token(), window});
    s.mtp_streams_width = mtp_streams_width;
    s.mtp_streams_kind = int(s.kinds.size());
    s.kinds.push_back({"mtp streams", 1, size_t(block_size) * size_t(mtp_streams_width) * sizeof(float), 1});
  }
  if (s.kinds.size() > size_t(kMaxKvKinds))
    return Status::Error("DeepSeek-V4 layout needs more than " + std::to_string(kMaxKvKinds) + " cache kinds");
  return s;
}

namespace {

uint8_t* window_entry(const KvCacheView& kv, const BatchSequence& s, int kind, size_t offset, const MlaCacheLayout& e,
                      int block_size, int32_t position) {
  const int32_t block = s.block_tables[size_t(kind)][position / block_size];
  DI_CHECK(block >= 0);  // a released window block is never read
  return kv.kinds[size_t(kind)].block(0, block) + offset + size_t(position % block_size) * e.bytes_per_token();
}

// Block index and slot of group g's compressed entry (see the header).
std::pair<int32_t, int> group_slot(int32_t group, int ratio, int block_size) {
  const int32_t last = (group + 1) * ratio - 1;
  return {last / block_size, ratio <= block_size ? (last % block_size) / ratio : 0};
}

}  // namespace

uint8_t* V4CacheSlots::kv_entry(const KvCacheView& kv, const BatchSequence& s, int layer, int32_t position) const {
  const V4LayerSlots& l = layers[size_t(layer)];
  return window_entry(kv, s, l.kv_kind, l.kv_offset, l.kv, block_size, position);
}

uint8_t* V4CacheSlots::inputs_entry(const KvCacheView& kv, const BatchSequence& s, int layer, int32_t position) const {
  const V4LayerSlots& l = layers[size_t(layer)];
  DI_CHECK(l.inputs_kind >= 0);
  return window_entry(kv, s, l.inputs_kind, l.inputs_offset, l.inputs, block_size, position);
}

uint8_t* V4CacheSlots::compressed_entry(const KvCacheView& kv, const BatchSequence& s, int layer, int32_t group) const {
  const V4LayerSlots& l = layers[size_t(layer)];
  const auto [block, slot] = group_slot(group, l.ratio, block_size);
  return kv.kinds[size_t(compressed_kind)].block(0, s.block_tables[size_t(compressed_kind)][block]) + l.entry_offset +
         size_t(slot) * l.entry.bytes_per_token();
}

uint8_t* V4CacheSlots::index_key(const KvCacheView& kv, const BatchSequence& s, int layer, int32_t group) const {
  const V4LayerSlots& l = layers[size_t(layer)];
  const auto [block, slot] = group_slot(group, l.ratio, block_size);
  return kv.kinds[size_t(compressed_kind)].block(0, s.block_tables[size_t(compressed_kind)][block]) + l.key_offset +
         size_t(slot) * l.key.bytes_per_token();
}

uint8_t* V4CacheSlots::mtp_kv_entry(const KvCacheView& kv, const int32_t* const* block_tables, int32_t position) const {
  DI_CHECK(mtp_kv_kind >= 0 && position >= 1);
  const int32_t block = block_tables[mtp_kv_kind][position / block_size];
  DI_CHECK(block >= 0);
  return kv.kinds[size_t(mtp_kv_kind)].block(0, block) + size_t(position % block_size) * mtp_kv.bytes_per_token();
}

float* V4CacheSlots::mtp_streams(const KvCacheView& kv, const int32_t* const* block_tables, int32_t position) const {
  DI_CHECK(mtp_streams_kind >= 0 && position >= 0);
  const int32_t block = block_tables[mtp_streams_kind][position / block_size];
  DI_CHECK(block >= 0);
  return reinterpret_cast<float*>(kv.kinds[size_t(mtp_streams_kind)].block(0, block)) +
         size_t(position % block_size) * size_t(mtp_streams_width);
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
      int i = 0;
      for (; i + 16 <= n; i += 16)  // a fixed trip count the compiler vectorizes (an indexer's keys: all of them, every step)
        for (int j = 0; j < 16; ++j) dst[i + j] = bf16_to_f32(e[i + j]);
      for (; i < n; ++i) dst[i] = bf16_to_f32(e[i]);
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
