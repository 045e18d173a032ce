// Blocks of a prompt's prefix held for a transfer between two workers' caches (prefill/decode
// disaggregation, dist/pd), outside any sequence. Block `index` of a prompt covers its tokens
// [index * block_size, (index + 1) * block_size) and is filed under their chained hash (as prompt
// tokens: both workers computed them as prompt, so provenance adds nothing to the hash); a
// PinnedBlock holds one reference on `block` of kind `kind`, so it is neither evicted nor handed
// out again until EngineCore::unpin drops it (or a request it was handed to is admitted).
//
// A prefix hit of h blocks needs, per kind, the blocks [first_live_block(h * block_size), h)
// (all of [0, h) for kinds without a lookback): the decode worker pins those its own prefix
// cache holds and reserves fresh blocks for the rest (reserve_prefix); the prefill worker pins
// its filed blocks for those slots (pin_prefix) while their bytes are read; once received,
// import_prefix files the fresh blocks under their hashes, and a request submitted with the
// pins is admitted through the ordinary prefix-hit path.
#pragma once

#include <cstdint>
#include <vector>

namespace deepinfer {

struct PinnedBlock {
  uint32_t kind = 0;
  int32_t index = 0;  // in the sequence's block table
  int32_t block = 0;  // in the kind's pool
  bool operator==(const PinnedBlock&) const = default;
};

struct PrefixReservation {
  std::vector<PinnedBlock> held;     // already filed here, pinned
  std::vector<PinnedBlock> receive;  // fresh, unfiled: to be filled with the peer's bytes
};

}  // namespace deepinfer
