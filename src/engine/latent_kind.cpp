#include "engine/latent_kind.h"

#include "core/check.h"

namespace deepinfer {

LatentKind::LatentKind(int block_size) : block_size_(block_size) { DI_CHECK(block_size > 0); }

int LatentKind::n_blocks(int n_tokens) const { return (n_tokens + block_size_ - 1) / block_size_; }

int LatentKind::n_blocks_hit(int max_blocks, const std::function<bool(int)>& is_filed) const {
  int h = 0;
  while (h < max_blocks && is_filed(h)) ++h;
  return h;
}

}  // namespace deepinfer
