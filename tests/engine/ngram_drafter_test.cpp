// Prompt-lookup drafts: the longest recurring suffix (within [min_n, max_n]) at its most recent
// earlier occurrence, and what followed it.
#include "engine/ngram_drafter.h"

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

using V = std::vector<int32_t>;

TEST(NgramDrafter, ProposesWhatFollowedTheMostRecentMatch) {
  const NgramDrafterOptions o{4, 2};
  // "5 6" recurs: after its most recent earlier occurrence (index 4) came 9, 1.
  EXPECT_EQ(propose_ngram_draft(V{5, 6, 7, 8, 5, 6, 9, 1, 5, 6}, 3, o), (V{9, 1, 5}));
  EXPECT_EQ(propose_ngram_draft(V{5, 6, 7, 8, 5, 6, 9, 1, 5, 6}, 1, o), (V{9}));
  // The longer suffix wins over a more recent shorter one: "1 2 3" matches at 0, "2 3" alone at 5.
  EXPECT_EQ(propose_ngram_draft(V{1, 2, 3, 4, 9, 2, 3, 7, 1, 2, 3}, 2, o), (V{4, 9}));
  // A draft ends where the tokens do.
  EXPECT_EQ(propose_ngram_draft(V{3, 4, 3, 4}, 5, o), (V{3, 4}));
}

TEST(NgramDrafter, NothingWithoutARecurringSuffix) {
  const NgramDrafterOptions o{4, 2};
  EXPECT_TRUE(propose_ngram_draft(V{1, 2, 3, 4, 5}, 3, o).empty());
  EXPECT_TRUE(propose_ngram_draft(V{7}, 3, o).empty());
  EXPECT_TRUE(propose_ngram_draft(V{}, 3, o).empty());
  EXPECT_TRUE(propose_ngram_draft(V{1, 2, 9, 2}, 3, o).empty());  // only a 1-token suffix recurs
  EXPECT_EQ(propose_ngram_draft(V{1, 2, 9, 2}, 3, NgramDrafterOptions{4, 1}), (V{9, 2}));
}

}  // namespace
}  // namespace deepinfer
