// KvCache: the memory of the paged MLA latent cache. One allocation for all layers, laid out
// [n_layers][n_blocks][block_size][layout.bytes_per_token()]: block id b holds the same tokens
// in every layer, so one block table serves the whole model. Sized from a byte budget.
// The model writes and reads it (KvCacheView); the engine only allocates it and copies blocks.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"
#include "engine/kv_cache_manager.h"
#include "model/forward_batch.h"

namespace deepinfer {

// --kv-cache-dtype spellings: "bf16" (also "auto"), "fp8" (also "fp8_e4m3"), "f32".
std::optional<DType> parse_kv_cache_dtype(std::string_view name);
std::string_view kv_cache_dtype_name(DType dtype);

struct KvCacheInfo {
  DType dtype = DType::BF16;
  int n_layers = 0;
  int n_blocks = 0;
  int block_size = 0;
  size_t bytes_per_token_layer = 0;  // one token in one layer
  size_t bytes_per_token() const { return bytes_per_token_layer * size_t(n_layers); }
  size_t n_tokens() const { return size_t(n_blocks) * size_t(block_size); }
  size_t bytes() const { return n_tokens() * bytes_per_token(); }
  // e.g. "KV cache: 1024 blocks x 64 tokens = 65536 tokens, bf16, 1152 B/token/layer x 27 layers
  //       = 31104 B/token, 1.90 GiB"
  std::string describe() const;
};

class KvCache {
 public:
  // As many whole blocks as fit in `bytes_budget`; an error if not even one does.
  static Result<std::unique_ptr<KvCache>> create(const MlaCacheLayout& layout, int n_layers, int block_size,
                                                 size_t bytes_budget);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvCacheInfo& info() const { return info_; }
  const KvCacheView& view() const { return view_; }
  // Copies every layer's block src to dst, in order (a later copy may read an earlier's dst).
  void copy_blocks(std::span<const BlockCopy> copies);

 private:
  KvCache(KvCacheInfo info, KvCacheView view, uint8_t* base, size_t bytes);

  KvCacheInfo info_;
  KvCacheView view_;
  uint8_t* base_;
  size_t bytes_;
};

}  // namespace deepinfer
