// GrammarConstraint: what a request asks of the shape of its output (structured output): a
// compiled grammar over the model's vocabulary, shared by every sample of the request and by
// other requests of the same grammar (its GrammarMaskCache memoizes the allowed-token masks).
//
// The constraint covers the output from its first token, or, for reasoning models, from the
// token after the first `start_after_token` (`</think>`): reasoning is never constrained.
// Immutable once built; the engine gives each sample its own GrammarMatcher over `masks`.
#pragma once

#include <cstdint>
#include <memory>

#include "grammar/grammar_mask_cache.h"

namespace deepinfer {

struct GrammarConstraint {
  std::shared_ptr<grammar::GrammarMaskCache> masks;  // thread-safe; shared between requests
  int32_t start_after_token = -1;                    // -1: constrained from the first output token
  // Whether the engine computes the next mask on another thread while the forward pass runs
  // (SequenceGrammars::prefetch_masks), or on the engine thread before sampling. The tokens are
  // the same either way.
  bool overlap_masks = true;
};

}  // namespace deepinfer
