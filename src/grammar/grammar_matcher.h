// GrammarMatcher: the token-level matcher of one sequence: which tokens of the vocabulary may come
// next under a CompiledGrammar, and the grammar state as tokens are accepted or rolled back.
//
// Masks come from a GrammarMaskCache, shared by the matchers of one grammar and vocabulary (pass
// the same cache to the sequences of a request and to requests with the same schema) or private
// to this matcher. End ids are allowed exactly where the grammar accepts; after an end id is
// accepted the matcher is terminated and only end ids stay allowed.
//
// Failure: if the automaton passes one of its limits, status() fails with the reason, the mask
// allows only end ids, and the caller should finish the sequence with that error.
// A matcher is used by one thread at a time; matchers sharing a cache may run on different
// threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "grammar/compiled_grammar.h"
#include "grammar/grammar_mask_cache.h"
#include "grammar/token_vocabulary.h"

namespace deepinfer::grammar {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<GrammarMaskCache> cache);
  // A matcher with a cache of its own.
  GrammarMatcher(const CompiledGrammar& grammar, std::shared_ptr<const TokenVocabulary> vocabulary,
                 MatcherOptions options = {});

  // Writes vocabulary().bitmask_words() words: bit (id % 32) of word (id / 32) is set iff token
  // id may come next.
  void fill_next_token_bitmask(uint32_t* bitmask);
  // Advances by token `id` when it is allowed; false (state unchanged) when not.
  bool accept_token(int32_t id);
  // Advances by raw bytes (one step for rollback) when the grammar allows them; false when not.
  bool accept_bytes(std::string_view bytes);
  // Undoes the last n accepted steps (tokens or accept_bytes calls); n <= n_steps().
  void rollback(size_t n);
  size_t n_steps() const { return history_.size() - 1; }

  // Whether an end id may come now (the output so far is a complete sentence).
  bool can_end() const;
  // Whether generation is over: an end id was accepted, or the sentence is complete and nothing
  // can extend it.
  bool is_terminated() const;
  // The fewest bytes that would complete the output (0 when it can end now; 0 when terminated):
  // how far the output is from a possible end, for steering toward one (e.g. near a token
  // budget).
  uint32_t min_bytes_to_end();
  Status status() const { return cache_->status(); }
  const TokenVocabulary& vocabulary() const { return cache_->vocabulary(); }
  const std::shared_ptr<GrammarMaskCache>& cache() const { return cache_; }

 private:
  static constexpr int32_t kTerminated = -3;
  int32_t current() const { return history_.back(); }

  std::shared_ptr<GrammarMaskCache> cache_;
  std::vector<int32_t> history_;  // state after each step; [0] the initial state
};

}  // namespace deepinfer::grammar
