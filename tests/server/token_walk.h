// Random token walks under a grammar over a real vocabulary, for the strict tool-call tests: each
// step's mask checked against a brute-force reference (every token's bytes walked through a
// separate automaton), tokens drawn among a few random allowed ones plus the format's marker
// tokens, mostly the one that leaves the fewest bytes to an end.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/grammar_automaton.h"
#include "grammar/grammar_matcher.h"
#include "grammar/token_vocabulary.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::token_walk {

inline bool allowed(const std::vector<uint32_t>& mask, int32_t id) { return (mask[size_t(id) / 32] >> (id % 32)) & 1; }

// Every token's verdict by walking its bytes from the state after `text` in a fresh automaton.
inline void expect_brute_force_mask(const grammar::CompiledGrammar& g, const grammar::TokenVocabulary& vocab,
                                    const std::string& text, const std::vector<uint32_t>& mask) {
  grammar::GrammarAutomaton a(g.grammar());
  const int32_t state = a.walk(a.initial_state(), text);
  ASSERT_NE(state, grammar::GrammarAutomaton::kDead);
  size_t n_wrong = 0;
  for (size_t id = 0; id < vocab.size(); ++id) {
    const std::string& t = vocab.bytes(int32_t(id));
    const bool ok = vocab.is_end(int32_t(id)) ? a.accepts(state)
                                              : !t.empty() && a.walk(state, t) != grammar::GrammarAutomaton::kDead;
    n_wrong += ok != allowed(mask, int32_t(id));
  }
  EXPECT_EQ(n_wrong, 0u) << "after " << text;
}

// The generated text (decoded, which must equal the tokens' bytes), starting with the tokens
// `start` (which the grammar must allow); masks checked by brute force at the first `n_checked`
// steps. The walk ends where the grammar ends it or an end token is drawn.
inline std::string random_walk(const grammar::CompiledGrammar& g, const Tokenizer& tokenizer,
                               const std::shared_ptr<const grammar::TokenVocabulary>& vocab,
                               const std::vector<int32_t>& markers, uint64_t seed, int n_checked,
                               const std::vector<int32_t>& start = {}) {
  grammar::GrammarMatcher m(g, vocab);
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> mask(vocab->bitmask_words());
  std::vector<int32_t> ids;
  std::string bytes;
  for (int32_t id : start) {
    EXPECT_TRUE(m.accept_token(id)) << "start token " << id;
    ids.push_back(id);
    bytes += vocab->bytes(id);
  }
  for (int step = 0; step < 600 && !m.is_terminated(); ++step) {
    m.fill_next_token_bitmask(mask.data());
    if (step < n_checked) expect_brute_force_mask(g, *vocab, bytes, mask);
    std::vector<int32_t> candidates;
    for (int32_t id : markers)
      if (allowed(mask, id)) candidates.push_back(id);
    for (int32_t id : vocab->end_ids())
      if (allowed(mask, id)) candidates.push_back(id);
    std::vector<int32_t> all;
    for (size_t id = 0; id < vocab->size(); ++id)
      if (allowed(mask, int32_t(id))) all.push_back(int32_t(id));
    for (int k = 0; k < 12 && !all.empty(); ++k) candidates.push_back(all[rng() % all.size()]);
    EXPECT_FALSE(candidates.empty());
    if (candidates.empty()) break;
    int32_t pick = candidates[rng() % candidates.size()];
    if (rng() % 4 != 0) {
      uint32_t best = UINT32_MAX;
      for (int32_t id : candidates) {
        EXPECT_TRUE(m.accept_token(id)) << id;
        const uint32_t left = m.min_bytes_to_end();
        m.rollback(1);
        if (left < best) best = left, pick = id;
      }
    }
    EXPECT_TRUE(m.accept_token(pick));
    if (vocab->is_end(pick)) break;
    ids.push_back(pick);
    bytes += vocab->bytes(pick);
  }
  EXPECT_TRUE(m.can_end()) << bytes;
  auto text = tokenizer.decode(ids, /*skip_special_tokens=*/true);
  EXPECT_TRUE(text.ok());
  EXPECT_EQ(text.value(), bytes);
  return bytes;
}

}  // namespace deepinfer::token_walk
