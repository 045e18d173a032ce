// KvCacheManager: which blocks each sequence holds, for every kind of per-layer state, and the
// prefix cache over them. The scheduler's only view of KV memory, in tokens and sequences; pure
// bookkeeping (block ids, no tensors). Single-threaded (the engine thread).
//
// Prefix caching: once a step has computed a full block of a sequence, the block is filed in the
// pool's index under the chained hash of its tokens; with hash_provenance (models whose KV
// depends on provenance, CausalLM::kv_depends_on_provenance) the hash also counts the block's
// generated tokens (Sequence::n_prompt on), so a block holding any never matches a prompt block. A sequence being
// admitted takes every filed block of its leading full blocks instead of recomputing them; the
// last token is always recomputed, since the step that computes it yields the next logits.
// Blocks of finished or preempted sequences stay filed while free and are evicted least recently
// released first, a sequence's tail before its head.
//
// Copy-on-write: forked samples share their parent's blocks, including a partially filled last
// block. Whoever writes into such a shared block first gets a private copy; the runner copies the
// memory (BlockCopy) before the step's forward.
//
// Kinds (kv_kind.h): each kind has its own pool and index. A kind with a lookback releases a
// sequence's blocks once no step reads them again (when the sequence next allocates); they stay
// filed while free, so a later prefix hit can still restore the window before its cut.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "engine/block_pool.h"
#include "engine/kv_kind.h"
#include "engine/sequence.h"

namespace deepinfer {

// Before the step's forward, copy every layer's contents of block src into block dst.
struct BlockCopy {
  int kind = 0;
  int32_t src = 0;
  int32_t dst = 0;
};

// One kind as the manager is given it: its lookback and its pool's size.
struct KvKindBlocks {
  int lookback = 0;
  int n_blocks = 0;
};

struct PrefixCacheStats {
  uint64_t n_query_tokens = 0;  // tokens of sequences admitted (their whole length)
  uint64_t n_hit_tokens = 0;    // of those, tokens whose KV came from the cache
  uint64_t n_evicted_blocks = 0;
};

class KvCacheManager {
 public:
  KvCacheManager(int block_size, const std::vector<KvKindBlocks>& kinds, bool enable_prefix_caching,
                 bool hash_provenance = false);

  int n_kinds() const { return int(kinds_.size()); }
  const BlockPool& pool(int kind = 0) const { return pools_[size_t(kind)]; }
  const PrefixCacheStats& prefix_stats() const { return stats_; }
  // The fullest kind's fraction of blocks in use (held by a sequence); free filed blocks count as free.
  double usage() const;
  // The longest sequence the pools can hold at all (each kind's resident blocks in its pool).
  int max_tokens_per_sequence() const;

  // Leading tokens of a waiting sequence whose KV the prefix cache holds: whole blocks, fewer
  // than n_tokens. 0 with prefix caching off.
  int n_prefix_hit_tokens(Sequence& seq);
  // Gives a sequence without blocks the cached blocks of its first n_hit tokens (a value from
  // n_prefix_hit_tokens) and new blocks for n_new more; sets its n_computed to n_hit.
  // False, changing nothing, when the pool lacks blocks.
  bool admit(Sequence& seq, int n_hit, int n_new);
  // Makes room for n_new more tokens after seq's n_computed, copying on write (see above), and
  // releases the blocks its lookback kinds no longer read. False, allocating nothing, when a
  // pool lacks blocks.
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

  // Blocks held outside any sequence, for a transfer between workers (engine/prefix_transfer.h).
  bool prefix_caching() const { return prefix_caching_; }
  // The (kind, table index) of every block a prefix hit of the first n_blocks blocks needs:
  // each kind's [first_live_block(n_blocks * block_size), n_blocks).
  std::vector<std::pair<uint32_t, int>> prefix_hit_slots(int n_blocks) const;
  // The block filed under (hash, kind), with one more reference; nullopt if none is filed.
  std::optional<int32_t> pin_filed(uint32_t kind, const BlockHash& hash);
  // n fresh, unfiled blocks of a kind (one reference each) appended to out; false, allocating
  // nothing, if the pool has fewer free.
  bool allocate_unfiled(uint32_t kind, int n, std::vector<int32_t>& out);
  // Files a held block under (hash, kind); if another block already holds that key, that block
  // is held instead and this one released. Returns the block now held.
  int32_t file_held(uint32_t kind, int32_t block, const BlockHash& hash);
  // Drops one reference taken by pin_filed, allocate_unfiled or file_held.
  void unpin(uint32_t kind, int32_t block) { pools_[kind].unref(block); }

 private:
  void hash_full_blocks(Sequence& seq) const;
  // Releases seq's blocks of every lookback kind before its first live block.
  void release_dead_blocks(Sequence& seq);

  int block_size_;
  std::vector<KvKind> kinds_;
  bool prefix_caching_;
  bool hash_provenance_;
  std::vector<BlockPool> pools_;  // [kind]
  PrefixCacheStats stats_;
};

}  // namespace deepinfer
