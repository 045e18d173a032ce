// BlockHash: the identity of a full block of tokens for the prefix cache. Hashes are chained:
// block i's hash covers block i-1's hash and block i's token ids, so equal hashes mean equal
// prefixes (up to a 128-bit XXH3 collision, which we accept as impossible in practice).
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
BlockHash hash_block(const BlockHash* parent, std::span<const int32_t> token_ids);

}  // namespace deepinfer

template <>
struct std::hash<deepinfer::BlockHash> {
  size_t operator()(const deepinfer::BlockHash& h) const noexcept { return size_t(h.lo); }
};
