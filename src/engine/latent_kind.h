// LatentKind: MLA's paged latent cache. Every token keeps one entry (normalized latent plus
// roped key part, per layer) for the life of its sequence, so a table holds ceil(n / block_size)
// blocks and a prefix hit is the leading run of filed blocks.
#pragma once

#include "engine/kv_kind.h"

namespace deepinfer {

class LatentKind final : public KvKind {
 public:
  explicit LatentKind(int block_size);

  int n_blocks(int n_tokens) const override;
  int n_blocks_hit(int max_blocks, const std::function<bool(int)>& is_filed) const override;

 private:
  int block_size_;
};

}  // namespace deepinfer
