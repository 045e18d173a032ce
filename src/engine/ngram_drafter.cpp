#include "engine/ngram_drafter.h"

#include <algorithm>

namespace deepinfer {

std::vector<int32_t> propose_ngram_draft(std::span<const int32_t> tokens, int k, const NgramDrafterOptions& options) {
  const int n_tokens = int(tokens.size());
  for (int n = std::min(options.max_n, n_tokens - 1); n >= std::max(1, options.min_n); --n) {
    const auto suffix = tokens.subspan(size_t(n_tokens - n));
    // The most recent earlier occurrence that has at least one token after it.
    for (int start = n_tokens - n - 1; start >= 0; --start) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + start)) continue;
      const int from = start + n, count = std::min(k, n_tokens - from);
      return {tokens.begin() + from, tokens.begin() + from + count};
    }
  }
  return {};
}

std::vector<std::vector<int32_t>> NgramDrafter::propose(std::span<const DraftTarget> targets) {
  std::vector<std::vector<int32_t>> drafts;
  for (const DraftTarget& t : targets) drafts.push_back(propose_ngram_draft(t.seq->tokens(), t.n_drafts, options_));
  return drafts;
}

}  // namespace deepinfer
