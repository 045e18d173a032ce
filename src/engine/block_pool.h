// BlockPool: the KV cache's blocks as ids [0, n_blocks), with reference counts, a free queue in
// eviction order, and the prefix index (which full blocks hold which chained token hash).
//
// A block is either in use (ref_count > 0) or free (ref_count == 0, in the free queue). A free
// block may still be filed in the prefix index: its contents stay valid until it is handed out
// again, and a prefix-cache hit takes it back out of the queue. allocate() takes blocks from the
// head of the queue (least recently released first) and unfiles them. unref() puts a filed block
// at the tail (kept longest) and an unfiled one at the head (nothing worth keeping).
//
// Pure bookkeeping: no KV memory, no tensors. Single-threaded (the engine thread).
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "engine/block_hash.h"

namespace deepinfer {

// What a full block is filed under: its chained token hash, per kind of per-layer state
// (kind index in KvCacheManager), since each kind keeps its own blocks for the same tokens.
struct BlockKey {
  BlockHash hash;
  uint32_t kind = 0;
  bool operator==(const BlockKey&) const = default;
};

struct BlockKeyHasher {
  size_t operator()(const BlockKey& k) const noexcept { return size_t(k.hash.lo ^ (k.hash.hi * k.kind)); }
};

class BlockPool {
 public:
  explicit BlockPool(int n_blocks);

  int n_blocks() const { return int(ref_count_.size()); }
  int n_free() const { return n_free_; }      // ref_count == 0, filed or not
  int n_filed() const { return int(index_.size()); }
  int ref_count(int32_t block) const { return ref_count_[block]; }
  bool is_filed(int32_t block) const { return filed_key_[block].has_value(); }

  // Appends n blocks (n <= n_free()) from the head of the free queue to `out`, each with
  // ref_count 1 and unfiled. Returns how many of them were evicted from the prefix index.
  int allocate(int n, std::vector<int32_t>& out);
  // One more reference; a free block leaves the free queue.
  void ref(int32_t block);
  // One reference less; at zero the block enters the free queue (see the header comment).
  void unref(int32_t block);

  // The block filed under `key`, if any (in use or free).
  std::optional<int32_t> find(const BlockKey& key) const;
  // Files an in-use, unfiled block under `key`; false (and nothing changes) if another block
  // already holds that key.
  bool file(int32_t block, const BlockKey& key);

  // Aborts unless the free queue, counts and index agree. For tests; O(n_blocks).
  void check_invariants() const;

 private:
  void queue_remove(int32_t block);
  void queue_push_front(int32_t block);
  void queue_push_back(int32_t block);

  std::vector<int32_t> ref_count_;              // [n_blocks]
  std::vector<std::optional<BlockKey>> filed_key_;  // [n_blocks]
  std::unordered_map<BlockKey, int32_t, BlockKeyHasher> index_;
  // Free queue: a doubly linked list through prev_/next_, with sentinel id n_blocks.
  std::vector<int32_t> prev_, next_;            // [n_blocks + 1]
  int n_free_ = 0;
};

}  // namespace deepinfer
