#include "engine/kv_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
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

double KvCacheInfo::bytes_per_token() const {
  std::vector<KvKindSpec> specs;
  for (const KvKindInfo& k : kinds) specs.push_back(k.spec);
  return kv_bytes_per_token(specs, block_size);
}

size_t KvCacheInfo::bytes_per_sequence_window() const {
  std::vector<KvKindSpec> specs;
  for (const KvKindInfo& k : kinds) specs.push_back(k.spec);
  return kv_bytes_per_sequence_window(specs, block_size);
}

size_t KvCacheInfo::n_tokens() const {
  size_t n = SIZE_MAX;
  for (const KvKindInfo& k : kinds) {
    if (k.spec.lookback == 0) n = std::min(n, size_t(k.n_blocks) * size_t(block_size));
  }
  return n == SIZE_MAX ? 0 : n;
}

size_t KvCacheInfo::bytes() const {
  size_t n = 0;
  for (const KvKindInfo& k : kinds) n += k.bytes();
  return n;
}

std::string KvCacheInfo::describe() const {
  std::string s = "KV cache (" + std::string(kv_cache_dtype_name(dtype)) + ", " + std::to_string(block_size) +
                  "-token blocks):";
  char buf[256];
  for (size_t i = 0; i < kinds.size(); ++i) {
    const KvKindInfo& k = kinds[i];
    std::snprintf(buf, sizeof buf, "%s %s %d blocks of %zu B x %d slabs", i ? ";" : "", k.spec.name.c_str(),
                  k.n_blocks, k.spec.bytes_per_block, k.spec.n_slabs);
    s += buf;
    if (k.spec.lookback > 0) s += " (last " + std::to_string(k.spec.lookback) + " positions)";
  }
  std::snprintf(buf, sizeof buf, "; %.1f B/token", bytes_per_token());
  s += buf;
  if (bytes_per_sequence_window() > 0) s += " + " + std::to_string(bytes_per_sequence_window()) + " B/sequence";
  std::snprintf(buf, sizeof buf, ", %zu tokens, %.2f GiB", n_tokens(), double(bytes()) / double(1ull << 30));
  return s + buf;
}

int window_blocks_per_sequence(const KvKindSpec& kind, int block_size, int max_num_batched_tokens) {
  DI_CHECK(kind.lookback > 0 && block_size > 0 && max_num_batched_tokens > 0);
  return (kind.lookback + block_size - 1) / block_size + 2 + (max_num_batched_tokens + block_size - 1) / block_size;
}

Result<std::vector<int>> kv_blocks_for_budget(const std::vector<KvKindSpec>& kinds, int block_size, size_t bytes_budget,
                                              int max_num_seqs, int max_num_batched_tokens) {
  DI_CHECK(!kinds.empty() && block_size > 0 && max_num_seqs > 0 && max_num_batched_tokens > 0);
  std::vector<int> n_blocks(kinds.size(), 0), least(kinds.size(), 0);
  size_t demand_bytes = 0, least_bytes = 0, full_block_bytes = 0;
  auto block_bytes = [&](size_t k) { return size_t(kinds[k].n_slabs) * kinds[k].bytes_per_block; };
  for (size_t k = 0; k < kinds.size(); ++k) {
    DI_CHECK(block_bytes(k) > 0);
    if (kinds[k].lookback > 0) {
      const int chunk = (max_num_batched_tokens + block_size - 1) / block_size;
      least[k] = window_blocks_per_sequence(kinds[k], block_size, max_num_batched_tokens);
      n_blocks[k] = max_num_seqs * (least[k] - chunk) + chunk;
      demand_bytes += size_t(n_blocks[k]) * block_bytes(k);
      least_bytes += size_t(least[k]) * block_bytes(k);
    } else {
      full_block_bytes += block_bytes(k);
    }
  }
  const std::string budget = std::to_string(bytes_budget) + " bytes";
  if (least_bytes + full_block_bytes > bytes_budget) {
    return Status::Error("KV cache budget of " + budget + " holds no block of " + std::to_string(block_size) +
                         " tokens beside one sequence's windows (" + std::to_string(least_bytes + full_block_bytes) +
                         " bytes)");
  }
  // Windows take at most half of a budget shared with full kinds; fewer blocks than their
  // sequences want only means that fewer sequences run at once.
  const size_t cap = full_block_bytes > 0 ? bytes_budget / 2 : bytes_budget;
  size_t window_bytes = 0;
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (kinds[k].lookback == 0) continue;
    if (demand_bytes > cap) {
      n_blocks[k] = std::max(least[k], int(double(n_blocks[k]) * (double(cap) / double(demand_bytes))));
    }
    window_bytes += size_t(n_blocks[k]) * block_bytes(k);
  }
  if (full_block_bytes > 0) {
    const size_t n = (bytes_budget - std::min(window_bytes, bytes_budget)) / full_block_bytes;
    if (n == 0) {
      return Status::Error("KV cache budget of " + budget + " holds no block of " + std::to_string(block_size) +
                           " tokens (" + std::to_string(full_block_bytes) + " bytes)");
    }
    if (n > size_t(INT32_MAX) / size_t(block_size)) {
      return Status::Error("KV cache budget of " + budget + " is more tokens than 2^31");
    }
    for (size_t k = 0; k < kinds.size(); ++k) {
      if (kinds[k].lookback == 0) n_blocks[k] = int(n);
    }
  }
  return n_blocks;
}

Result<std::unique_ptr<KvCache>> KvCache::create(const std::vector<KvKindSpec>& kinds, const std::vector<int>& n_blocks,
                                                 DType dtype, int block_size) {
  DI_CHECK(!kinds.empty() && kinds.size() == n_blocks.size() && kinds.size() <= size_t(kMaxKvKinds) && block_size > 0);
  KvCacheInfo info;
  info.dtype = dtype;
  info.block_size = block_size;
  KvCacheView view;
  view.dtype = dtype;
  view.block_size = block_size;
  std::vector<Mapping> mappings;
  for (size_t k = 0; k < kinds.size(); ++k) {
    DI_CHECK(n_blocks[k] > 0 && kinds[k].n_slabs > 0 && kinds[k].bytes_per_block > 0);
    info.kinds.push_back({kinds[k], n_blocks[k]});
    const size_t slab_bytes = size_t(n_blocks[k]) * kinds[k].bytes_per_block;
    const size_t bytes = slab_bytes * size_t(kinds[k].n_slabs);
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      for (const Mapping& m : mappings) munmap(m.base, m.bytes);
      return Status::Error("cannot allocate the KV cache's " + kinds[k].name + " blocks: " + std::to_string(bytes) +
                           " bytes: " + std::strerror(err));
    }
    mappings.push_back({static_cast<uint8_t*>(p), bytes});
    KvKindView kv{n_blocks[k], kinds[k].bytes_per_block, {}};
    for (int s = 0; s < kinds[k].n_slabs; ++s) kv.slab_base.push_back(mappings.back().base + size_t(s) * slab_bytes);
    view.kinds.push_back(std::move(kv));
  }
  return std::unique_ptr<KvCache>(new KvCache(std::move(info), std::move(view), std::move(mappings)));
}

KvCache::KvCache(KvCacheInfo info, KvCacheView view, std::vector<Mapping> mappings)
    : info_(std::move(info)), view_(std::move(view)), mappings_(std::move(mappings)) {}

KvCache::~KvCache() {
  for (const Mapping& m : mappings_) munmap(m.base, m.bytes);
}

void KvCache::copy_blocks(std::span<const BlockCopy> copies) {
  for (const BlockCopy& c : copies) {
    const KvKindView& k = view_.kinds[size_t(c.kind)];
    for (size_t s = 0; s < k.slab_base.size(); ++s) {
      std::memcpy(k.block(int(s), c.dst), k.block(int(s), c.src), k.bytes_per_block);
    }
  }
}

}  // namespace deepinfer
