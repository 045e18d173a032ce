// GrammarMaskCache: what the matchers of one (CompiledGrammar, TokenVocabulary) pair share: the
// byte-level automaton (its states and transitions) and the allowed-token mask of every state
// seen, so that a state one sequence has met costs every other sequence one copy of its mask
// (n > 1 choices, and every request of a cached schema, start warm).
//
// A state's mask has two parts. What its frames decide alone (FrameMask: tokens taken whole
// within the frames of the state's top parses, whatever the stack below holds) comes from the
// vocabulary's FrameMaskStore, keyed by the frames' grammar structure, so that, e.g., the inside
// of a JSON string is walked once per vocabulary for every schema; it is computed on a miss by
// walking the vocabulary's byte trie with the state's detached automaton state (a subtree is
// skipped at its first dead byte, and taken whole when all its bytes loop back to the state the
// walk starts from). Then the few trie subtrees where a parse pops out of the frames are walked
// with the real state, and the end ids are set where the state accepts. The cache is bounded
// (MatcherOptions::mask_cache_bytes, the frame masks it holds included; cleared when full) as the
// automaton is (AutomatonLimits); past a limit, status() fails for every matcher sharing it,
// and whoever keeps caches by schema should give new sequences a new cache (states accumulate
// over the sequences a cache serves).
// Thread-safe: one mutex guards all of it (a mask computation holds it for its duration).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "grammar/compiled_grammar.h"
#include "grammar/grammar_automaton.h"
#include "grammar/token_vocabulary.h"

namespace deepinfer::grammar {

struct MatcherOptions {
  AutomatonLimits automaton;
  size_t mask_cache_bytes = 64u << 20;  // cached masks; cleared when full
};

class GrammarMaskCache {
 public:
  GrammarMaskCache(const CompiledGrammar& grammar, std::shared_ptr<const TokenVocabulary> vocabulary,
                   MatcherOptions options = {});

  const TokenVocabulary& vocabulary() const { return *vocabulary_; }
  int32_t initial_state() const { return initial_; }
  // The automaton's answers (GrammarAutomaton), under the lock.
  int32_t walk(int32_t state, std::string_view bytes);
  bool accepts(int32_t state);
  bool can_continue(int32_t state);
  uint32_t bytes_to_accept(int32_t state);
  // Writes the mask of `state` (vocabulary().bitmask_words() words). When status() fails, the
  // mask allows only the end ids.
  void fill_mask(int32_t state, uint32_t* bitmask);
  Status status();
  size_t n_cached_masks();

 private:
  void compute_mask(int32_t state, uint32_t* bitmask);
  // The frame mask of `state`, from this cache, the vocabulary's store, or computed; null when
  // the automaton passes a limit.
  std::shared_ptr<const FrameMask> frame_mask(int32_t state);
  std::shared_ptr<const FrameMask> compute_frame_mask(int32_t detached);
  // Sets the tokens of trie subtree `root` that `base` (the state after the root's prefix) takes.
  void walk_subtree(uint32_t root, int32_t base, uint32_t* bitmask);
  // The bytes that lead from `state` back to itself.
  ByteSet self_loops(int32_t state);
  void set_end_bits(uint32_t* bitmask) const;

  std::shared_ptr<const TokenVocabulary> vocabulary_;
  MatcherOptions options_;
  std::mutex mu_;
  GrammarAutomaton automaton_;
  int32_t initial_;
  std::unordered_map<int32_t, size_t> mask_slot_;  // state -> offset in masks_
  std::vector<uint32_t> masks_;
  std::unordered_map<int32_t, std::shared_ptr<const FrameMask>> frame_of_;  // detached state ->
  size_t frame_bytes_ = 0;  // of the frame masks frame_of_ holds, counted in mask_cache_bytes
  std::vector<int32_t> walk_states_;  // per trie depth
  std::string path_;                  // the walk's bytes, per trie depth
};

}  // namespace deepinfer::grammar
