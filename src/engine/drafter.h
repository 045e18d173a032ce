// Drafter: where speculative draft tokens come from. EngineCore asks one drafter per step for
// the sequences that decode (engine_core.h says how drafts are verified); implementations:
// NgramDrafter (ngram_drafter.h, the sequence's own tokens) and MtpDrafter (mtp_drafter.h, the
// model's MTP block over its cached state). Engine thread only.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sequence.h"

namespace deepinfer {

struct DraftTarget {
  const Sequence* seq;  // its step computes exactly its last token (n_uncomputed() == 1); its
                        // earlier positions' state is in the cache, block copies done
  int n_drafts;         // the most drafts wanted, >= 1
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Per target, in order, at most n_drafts tokens to follow its tokens (none: no proposal). A
  // target's drafts depend only on its own sequence, and drafts for fewer tokens are a prefix of
  // those for more.
  virtual std::vector<std::vector<int32_t>> propose(std::span<const DraftTarget> targets) = 0;
};

}  // namespace deepinfer
