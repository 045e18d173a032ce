// NgramDrafter: prompt-lookup drafts for speculative decoding. The last n tokens of a sequence
// (n from max_n down to min_n) are looked up in its earlier tokens, prompt and output alike; at
// the most recent earlier match, the tokens that followed it are the draft. Free to compute and
// right whenever the text repeats itself (code edits, quoted tool results, lists).
//
// Pure function of the tokens, so drafts (and what the engine does with them) never depend on
// other sequences.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/drafter.h"

namespace deepinfer {

struct NgramDrafterOptions {
  int max_n = 4;  // longest suffix looked up
  int min_n = 2;  // shortest suffix looked up
};

// Up to k draft tokens to follow `tokens`; empty when no suffix of length [min_n, max_n] recurs.
std::vector<int32_t> propose_ngram_draft(std::span<const int32_t> tokens, int k, const NgramDrafterOptions& options);

// propose_ngram_draft over each target's tokens.
class NgramDrafter final : public Drafter {
 public:
  explicit NgramDrafter(NgramDrafterOptions options = {}) : options_(options) {}
  std::vector<std::vector<int32_t>> propose(std::span<const DraftTarget> targets) override;

 private:
  NgramDrafterOptions options_;
};

}  // namespace deepinfer
