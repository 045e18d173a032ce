#include "model/deepseek_v41/kv_layout.h"

#include <algorithm>

#include "core/check.h"

namespace deepinfer {
namespace {

V41KvFormat fitting(V41KvFormat f, int width) { return width % kV41KvBlock[int(f)] == 0 ? f : V41KvFormat::kF32; }

uint8_t* block_of(const KvCacheView& kv, int kind, const BatchSequence& s, int32_t position) {
  const int32_t id = s.block_tables[size_t(kind)][position / kv.block_size];
  DI_CHECK(id >= 0);
  return kv.kinds[size_t(kind)].block(0, id);
}

}  // namespace

Result<V41KvLayout> V41KvLayout::make(const DeepseekV41Config& c, DType cache_dtype, int block_size) {
  if (cache_dtype != DType::F32 && cache_dtype != DType::BF16 && cache_dtype != DType::F8_E4M3)
    return Status::Error("DeepSeek-V4.1 KV cache dtype must be f32, bf16 or fp8 (the last two store the published formats)");
  if (block_size < 1) return Status::Error("KV block size must be positive");
  V41KvLayout k;
  const int L = c.num_hidden_layers;
  k.block_size = block_size;
  k.head_dim = c.head_dim;
  k.index_head_dim = c.index_head_dim;
  if (cache_dtype != DType::F32) {
    k.window_format = fitting(V41KvFormat::kFp8Block32, c.head_dim);
    k.entry_format = fitting(V41KvFormat::kFp4E4m3Block16, c.head_dim);
    k.key_format = fitting(V41KvFormat::kFp4Ue8m0Block32, c.index_head_dim);
    k.query_format = k.key_format;
  }
  k.window_bytes = v41_kv_bytes(k.window_format, c.head_dim);
  k.entry_bytes = v41_kv_bytes(k.entry_format, c.head_dim);
  k.key_bytes = v41_kv_bytes(k.key_format, c.index_head_dim);
  k.lookback = c.sliding_window - 1;
  k.window_block_bytes = size_t(L) * size_t(block_size) * k.window_bytes;
  size_t offset = 0;  // in an inputs block
  if (!c.engram_layer_ids.empty()) {
    k.ids_offset = int64_t(offset);
    offset += size_t(block_size) * 4;
    k.inputs_lookback = std::max(k.inputs_lookback, c.engram_max_ngram_size - 1);
  }
  k.group_offset.assign(size_t(L), -1);
  k.source_offset.assign(size_t(L), -1);
  k.source_ratio.assign(size_t(L), 0);
  size_t comp = 0;
  for (int l = 0; l < L; ++l) {
    if (!c.is_kv_source(l)) continue;
    const int r = c.compress_ratio(l);
    if (block_size % r != 0)
      return Status::Error("KV block size " + std::to_string(block_size) + " is not a multiple of compress ratio " +
                           std::to_string(r) + " (layer " + std::to_string(l) + ")");
    k.source_ratio[size_t(l)] = r;
    k.source_offset[size_t(l)] = int64_t(comp);
    comp += size_t(block_size / r) * (k.entry_bytes + k.key_bytes);
    if (r > 1) {
      k.group_offset[size_t(l)] = int64_t(offset);
      offset += size_t(block_size) * 2 * size_t(c.head_dim) * 4;
      k.inputs_lookback = std::max(k.inputs_lookback, r - 1);
    }
  }
  k.compressed_block_bytes = comp;
  k.inputs_block_bytes = offset;
  if (k.inputs_block_bytes > 0) k.inputs_kind = comp > 0 ? 2 : 1;
  return k;
}

std::vector<KvKindSpec> V41KvLayout::kinds() const {
  std::vector<KvKindSpec> out{{"window", 1, window_block_bytes, lookback}};
  if (compressed_block_bytes > 0) out.push_back({"compressed", 1, compressed_block_bytes, 0});
  if (inputs_kind >= 0) out.push_back({"inputs", 1, inputs_block_bytes, inputs_lookback});
  return out;
}

uint8_t* V41KvLayout::window_entry(const KvCacheView& kv, const BatchSequence& s, int layer, int32_t position) const {
  return block_of(kv, 0, s, position) + (size_t(layer) * size_t(block_size) + size_t(position % block_size)) * window_bytes;
}

uint8_t* V41KvLayout::token_id(const KvCacheView& kv, const BatchSequence& s, int32_t position) const {
  DI_CHECK(ids_offset >= 0);
  return block_of(kv, inputs_kind, s, position) + size_t(ids_offset) + size_t(position % block_size) * 4;
}

uint8_t* V41KvLayout::group_inputs(const KvCacheView& kv, const BatchSequence& s, int layer, int32_t position) const {
  DI_CHECK(group_offset[size_t(layer)] >= 0);
  return block_of(kv, inputs_kind, s, position) + size_t(group_offset[size_t(layer)]) +
         size_t(position % block_size) * 2 * size_t(head_dim) * 4;
}

uint8_t* V41KvLayout::compressed_entry(const KvCacheView& kv, const BatchSequence& s, int layer, int32_t group) const {
  const int r = source_ratio[size_t(layer)];
  DI_CHECK(r > 0);
  const int32_t last = (group + 1) * r - 1;
  return block_of(kv, 1, s, last) + size_t(source_offset[size_t(layer)]) +
         size_t((last % block_size) / r) * (entry_bytes + key_bytes);
}

}  // namespace deepinfer
