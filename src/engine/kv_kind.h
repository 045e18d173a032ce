// KvKind: one kind of per-layer state, as the KV cache manager sees it (see DESIGN.md).
//
// A model names its kinds (CausalLM::kv_kinds): DeepSeek-V3's MLA latent keeps an entry per
// token for the life of its sequence; DeepSeek-V4 keeps a window of recent per-token state
// (sliding-window K=V, compressor inputs) beside compressed entries kept for the whole
// sequence. The manager only needs to know which of a sequence's blocks a kind still reads:
// all of them (lookback 0), or those covering the last `lookback` positions before the next
// new token. Each kind has its own block pool (its blocks have their own size in bytes) and its
// own part of the prefix index; every sequence keeps one block table per kind.
//
// Block i of a table covers tokens [i * block_size, (i + 1) * block_size) of its sequence; the
// chained hash of those tokens (Sequence::block_hashes) is what block i is filed under.
#pragma once

#include <functional>

namespace deepinfer {

class KvKind {
 public:
  KvKind(int block_size, int lookback);

  int lookback() const { return lookback_; }

  // Length of a sequence's table once tokens [0, n_tokens) are in the cache.
  int n_blocks(int n_tokens) const { return (n_tokens + block_size_ - 1) / block_size_; }
  // The first block a step still reads when its first new token is at position n_computed;
  // blocks before it are released (0 for lookback 0).
  int first_live_block(int n_computed) const;
  // Blocks held at once by a sequence of n_tokens at its last step (n_tokens - 1 computed): the
  // most this kind needs for it.
  int n_blocks_resident(int n_tokens) const;

  // The largest h <= max_blocks such that the prefix cache restores this kind's state for the
  // first h full blocks of a sequence, given `is_filed(i)`: whether block i's key is in this
  // kind's index. Lookback 0 needs all of [0, h); a lookback kind only [first_live_block(h * block_size), h).
  int n_blocks_hit(int max_blocks, const std::function<bool(int)>& is_filed) const;

 private:
  int block_size_;
  int lookback_;
};

}  // namespace deepinfer
