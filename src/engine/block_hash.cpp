#include "engine/block_hash.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include "core/check.h"

namespace deepinfer {

BlockHash hash_block(const BlockHash* parent, std::span<const int32_t> token_ids, int n_generated) {
  DI_CHECK(n_generated >= 0 && size_t(n_generated) <= token_ids.size());
  XXH3_state_t state;
  DI_CHECK(XXH3_128bits_reset(&state) == XXH_OK);
  if (parent != nullptr) {
    const uint64_t words[2] = {parent->lo, parent->hi};
    XXH3_128bits_update(&state, words, sizeof(words));
  }
  XXH3_128bits_update(&state, token_ids.data(), token_ids.size_bytes());
  if (n_generated > 0) {  // a tag no token id takes (ids are >= 0), then the count
    const int32_t tag[2] = {-1, n_generated};
    XXH3_128bits_update(&state, tag, sizeof(tag));
  }
  const XXH128_hash_t h = XXH3_128bits_digest(&state);
  return BlockHash{h.low64, h.high64};
}

}  // namespace deepinfer
