// BlockHash: the identity of a full block of tokens for the prefix cache. Hashes are chained:
// block i's hash covers block i-1's hash, block i's token ids and, where the model's KV depends
// on it, their provenance, so equal hashes mean equal prefixes (up to a 128-bit XXH3 collision,
// which we accept as impossible in practice).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

namespace deepinfer {

struct BlockHash {
  uint64_t lo = 0;
  uint64_t hi = 0;
  bool operator==(const BlockHash&) const = default;
};

// Hash of a block whose tokens follow the block hashed as `parent` (nullptr for the first block).
// n_generated: how many of its tokens (its last ones) the model generated, for models whose KV
// depends on provenance (CausalLM::kv_depends_on_provenance), else 0. A block with generated
// tokens never hashes like the same tokens all in a prompt; with n_generated 0 the hash is that
// of the tokens alone.
BlockHash hash_block(const BlockHash* parent, std::span<const int32_t> token_ids, int n_generated = 0);

}  // namespace deepinfer

template <>
struct std::hash<deepinfer::BlockHash> {
  size_t operator()(const deepinfer::BlockHash& h) const noexcept { return size_t(h.lo); }
};
