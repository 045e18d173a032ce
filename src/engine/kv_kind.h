// KvKind: one kind of per-layer state, as the KV cache manager sees it (see DESIGN.md).
//
// DeepSeek-V3's MLA latent is the only kind today (LatentKind). DeepSeek-V4 adds a ring of the
// last W tokens (sliding window), compressed entries (one per r tokens, with indexer keys) and
// fixed per-request state. Every kind draws whole blocks from the one BlockPool and files its
// full blocks in the one prefix index under its own kind index, and every sequence keeps one
// block table per kind. The scheduler sees only token counts and the prefix index only keys, so
// a new kind is a new subclass (plus its dropping of blocks that left a window, in the manager),
// not a new scheduler or prefix cache.
//
// Block i of a table covers tokens [i * block_size, (i + 1) * block_size) of its sequence; the
// chained hash of those tokens (Sequence::block_hashes) is what block i is filed under.
#pragma once

#include <functional>

namespace deepinfer {

class KvKind {
 public:
  virtual ~KvKind() = default;

  // Blocks a sequence's table holds once tokens [0, n_tokens) are in the cache.
  virtual int n_blocks(int n_tokens) const = 0;

  // The largest h <= max_blocks such that the prefix cache restores this kind's state for the
  // first h full blocks of a sequence, given `is_filed(i)`: whether block i's key is in the
  // prefix index. The latent needs all of [0, h); a window would need only the last W tokens.
  virtual int n_blocks_hit(int max_blocks, const std::function<bool(int)>& is_filed) const = 0;
};

}  // namespace deepinfer
