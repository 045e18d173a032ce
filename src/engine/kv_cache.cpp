#include "engine/kv_cache.h"

#include <sys/mman.h>

#include <cstdio>
#include <cstring>

#include "core/check.h"

namespace deepinfer {

std::optional<DType> parse_kv_cache_dtype(std::string_view name) {
  if (name == "bf16" || name == "auto") return DType::BF16;
  if (name == "fp8" || name == "fp8_e4m3") return DType::F8_E4M3;
  if (name == "f32") return DType::F32;
  return std::nullopt;
}

std::string_view kv_cache_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::BF16: return "bf16";
    case DType::F8_E4M3: return "fp8";
    case DType::F32: return "f32";
    default: return dtype_name(dtype);
  }
}

std::string KvCacheInfo::describe() const {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "KV cache: %d blocks x %d tokens = %zu tokens, %s, %zu B/token/layer x %d layers = %zu B/token, %.2f GiB",
                n_blocks, block_size, n_tokens(), std::string(kv_cache_dtype_name(dtype)).c_str(),
                bytes_per_token_layer, n_layers, bytes_per_token(), double(bytes()) / double(1ull << 30));
  return buf;
}

Result<std::unique_ptr<KvCache>> KvCache::create(const MlaCacheLayout& layout, int n_layers, int block_size,
                                                 size_t bytes_budget) {
  DI_CHECK(n_layers > 0 && block_size > 0);
  KvCacheInfo info;
  info.dtype = layout.dtype;
  info.n_layers = n_layers;
  info.block_size = block_size;
  info.bytes_per_token_layer = layout.bytes_per_token();
  const size_t bytes_per_block = info.bytes_per_token() * size_t(block_size);
  const size_t n_blocks = bytes_budget / bytes_per_block;
  if (n_blocks == 0) {
    return Status::Error("KV cache budget of " + std::to_string(bytes_budget) + " bytes holds no block of " +
                         std::to_string(block_size) + " tokens (" + std::to_string(bytes_per_block) + " bytes)");
  }
  if (n_blocks > size_t(INT32_MAX) / size_t(block_size)) {
    return Status::Error("KV cache budget of " + std::to_string(bytes_budget) + " bytes is more tokens than 2^31");
  }
  info.n_blocks = int(n_blocks);
  const size_t bytes = info.bytes();
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return Status::Error("cannot allocate the KV cache: " + std::to_string(bytes) + " bytes: " + std::strerror(errno));
  }
  auto* base = static_cast<uint8_t*>(p);
  KvCacheView view;
  view.layout = layout;
  view.block_size = block_size;
  view.num_blocks = info.n_blocks;
  const size_t layer_bytes = n_blocks * bytes_per_block / size_t(n_layers);
  for (int l = 0; l < n_layers; ++l) view.layer_base.push_back(base + size_t(l) * layer_bytes);
  return std::unique_ptr<KvCache>(new KvCache(info, std::move(view), base, bytes));
}

KvCache::KvCache(KvCacheInfo info, KvCacheView view, uint8_t* base, size_t bytes)
    : info_(info), view_(std::move(view)), base_(base), bytes_(bytes) {}

KvCache::~KvCache() { munmap(base_, bytes_); }

void KvCache::copy_blocks(std::span<const BlockCopy> copies) {
  const size_t block_bytes = size_t(info_.block_size) * info_.bytes_per_token_layer;
  for (const BlockCopy& c : copies) {
    for (uint8_t* layer : view_.layer_base) {
      std::memcpy(layer + size_t(c.dst) * block_bytes, layer + size_t(c.src) * block_bytes, block_bytes);
    }
  }
}

}  // namespace deepinfer
