#include "engine/kv_kind.h"

#include <algorithm>

#include "core/check.h"

namespace deepinfer {

KvKind::KvKind(int block_size, int lookback) : block_size_(block_size), lookback_(lookback) {
  DI_CHECK(block_size > 0 && lookback >= 0);
}

int KvKind::first_live_block(int n_computed) const {
  if (lookback_ == 0) return 0;
  return std::max(0, n_computed - lookback_) / block_size_;
}

int KvKind::n_blocks_resident(int n_tokens) const {
  return n_blocks(n_tokens) - first_live_block(std::max(0, n_tokens - 1));
}

int KvKind::n_blocks_hit(int max_blocks, const std::function<bool(int)>& is_filed) const {
  if (lookback_ == 0) {  // the leading run of filed blocks
    int h = 0;
    while (h < max_blocks && is_filed(h)) ++h;
    return h;
  }
  for (int h = max_blocks; h > 0; --h) {  // the last blocks before h, a few per candidate
    bool restored = true;
    for (int i = first_live_block(h * block_size_); i < h && restored; ++i) restored = is_filed(i);
    if (restored) return h;
  }
  return 0;
}

}  // namespace deepinfer
