// KvCache: the memory of the paged cache, every kind of per-layer state the model keeps
// (CausalLM::kv_kinds). One allocation per kind, laid out [n_slabs][n_blocks][bytes_per_block]:
// block id b of a kind holds the same tokens in every slab, so one block table per kind serves
// the whole model. Sized from a byte budget (kv_blocks_for_budget). The model writes and reads
// it (KvCacheView); the engine only allocates it and copies blocks.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/kv_cache_manager.h"
#include "model/forward_batch.h"

namespace deepinfer {

// --kv-cache-dtype spellings: "bf16" (also "auto"), "fp8" (also "fp8_e4m3"), "f32".
std::optional<DType> parse_kv_cache_dtype(std::string_view name);
std::string_view kv_cache_dtype_name(DType dtype);

struct KvKindInfo {
  KvKindSpec spec;
  int n_blocks = 0;
  size_t bytes() const { return size_t(n_blocks) * size_t(spec.n_slabs) * spec.bytes_per_block; }
};

struct KvCacheInfo {
  DType dtype = DType::BF16;
  int block_size = 0;
  std::vector<KvKindInfo> kinds;
  // Bytes per token of the kinds that keep every block; most bytes one sequence holds at once
  // in the lookback kinds (see forward_batch.h).
  double bytes_per_token() const;
  size_t bytes_per_sequence_window() const;
  // Tokens the kinds that keep every block can hold (each its own pool; the least of them).
  size_t n_tokens() const;
  size_t bytes() const;
  // e.g. "KV cache (bf16, 64-token blocks): latent 1024 blocks of 73728 B (27 slabs); 1152 B/token
  //       per layer x 27 = 31104 B/token, 65536 tokens, 1.90 GiB"
  std::string describe() const;
};

// Blocks of a lookback kind that one sequence holds at the most: its lookback and the block being
// written, plus a step's worth of prefill tokens (max_num_batched_tokens). Precondition: lookback > 0.
int window_blocks_per_sequence(const KvKindSpec& kind, int block_size, int max_num_batched_tokens);

// Blocks per kind for a byte budget: each lookback kind gets what max_num_seqs sequences hold at
// once (their lookback and the block being written, plus a step's worth of prefill tokens), up to
// half the budget together (then proportionally fewer, never less than one sequence needs); the
// kinds that keep every block share the rest equally (they grow at the same rate). An error when
// the budget cannot hold one sequence's windows and a block of every other kind.
Result<std::vector<int>> kv_blocks_for_budget(const std::vector<KvKindSpec>& kinds, int block_size, size_t bytes_budget,
                                              int max_num_seqs, int max_num_batched_tokens);

class KvCache {
 public:
  static Result<std::unique_ptr<KvCache>> create(const std::vector<KvKindSpec>& kinds, const std::vector<int>& n_blocks,
                                                 DType dtype, int block_size);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvCacheInfo& info() const { return info_; }
  const KvCacheView& view() const { return view_; }
  // Copies every slab's block src to dst of the copy's kind, in order (a later copy may read an
  // earlier's dst).
  void copy_blocks(std::span<const BlockCopy> copies);

 private:
  struct Mapping {
    uint8_t* base = nullptr;
    size_t bytes = 0;
  };
  KvCache(KvCacheInfo info, KvCacheView view, std::vector<Mapping> mappings);

  KvCacheInfo info_;
  KvCacheView view_;
  std::vector<Mapping> mappings_;  // [kind]
};

}  // namespace deepinfer
