// KvCacheManager: which blocks each sequence holds, for every kind of per-layer state, and the
// prefix cache over them. The scheduler's only view of KV memory, in tokens and sequences; pure
// bookkeeping (block ids, no tensors). Single-threaded (the engine thread).
//
// Prefix caching: once a step has computed a full block of a sequence, the block is filed in the
// pool's index under the chained hash of its tokens (prompt or generated alike). A sequence being
// admitted takes every filed block of its leading full blocks instead of recomputing them; the
// last token is always recomputed, since the step that computes it yields the next logits.
// Blocks of finished or preempted sequences stay filed while free and are evicted least recently
// released first, a sequence's tail before its head.
//
// Copy-on-write: forked samples share their parent's blocks, including a partially filled last
// block. Whoever writes into such a shared block first gets a private copy; the runner copies the
// memory (BlockCopy) before the step's forward.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/block_pool.h"
#include "engine/kv_kind.h"
#include "engine/sequence.h"

namespace deepinfer {

// Before the step's forward, copy every layer's contents of block src into block dst.
struct BlockCopy {
  int32_t src = 0;
  int32_t dst = 0;
};

struct PrefixCacheStats {
  uint64_t n_query_tokens = 0;  // tokens of sequences admitted (their whole length)
  uint64_t n_hit_tokens = 0;    // of those, tokens whose KV came from the cache
  uint64_t n_evicted_blocks = 0;
};

class KvCacheManager {
 public:
  KvCacheManager(int n_blocks, int block_size, std::vector<std::unique_ptr<KvKind>> kinds,
                 bool enable_prefix_caching);

  const BlockPool& pool() const { return pool_; }
  const PrefixCacheStats& prefix_stats() const { return stats_; }
  // Fraction of blocks in use (held by a sequence); free filed blocks count as free.
  double usage() const { return 1.0 - double(pool_.n_free()) / pool_.n_blocks(); }
  // The longest sequence the pool can hold at all (every kind's blocks together).
  int max_tokens_per_sequence() const;

  // Leading tokens of a waiting sequence whose KV the prefix cache holds: whole blocks, fewer
  // than n_tokens. 0 with prefix caching off.
  int n_prefix_hit_tokens(Sequence& seq);
  // Gives a sequence without blocks the cached blocks of its first n_hit tokens (a value from
  // n_prefix_hit_tokens) and new blocks for n_new more; sets its n_computed to n_hit.
  // False, changing nothing, when the pool lacks blocks.
  bool admit(Sequence& seq, int n_hit, int n_new);
  // Makes room for n_new more tokens after seq's n_computed, copying on write (see above).
  // False, changing nothing, when the pool lacks blocks.
  bool allocate(Sequence& seq, int n_new, std::vector<BlockCopy>& copies);
  // Files seq's computed full blocks in the prefix index (call after a step computed them).
  void file_computed_blocks(Sequence& seq);
  // Shares every block of parent with a sample just forked from it.
  void fork(const Sequence& parent, Sequence& child);
  // Releases all of seq's blocks, last first.
  void free(Sequence& seq);
  // Drops seq's tokens from n_tokens on (rejected draft tokens), and the block hashes that
  // covered them. Nothing at or past n_tokens may have been filed: the caller truncates before
  // file_computed_blocks sees those tokens as computed.
  void truncate(Sequence& seq, int n_tokens);

 private:
  void hash_full_blocks(Sequence& seq) const;

  int block_size_;
  std::vector<std::unique_ptr<KvKind>> kinds_;
  bool prefix_caching_;
  BlockPool pool_;
  PrefixCacheStats stats_;
};

}  // namespace deepinfer
