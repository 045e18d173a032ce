#include "grammar/grammar_matcher.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"

namespace deepinfer::grammar {

GrammarMatcher::GrammarMatcher(const CompiledGrammar& grammar,
                               std::shared_ptr<const TokenVocabulary> vocabulary,
                               MatcherOptions options)
    : vocabulary_(std::move(vocabulary)),
      options_(options),
      automaton_(grammar.grammar(), options.automaton),
      history_{automaton_.initial_state()},
      walk_states_(vocabulary_->max_token_bytes() + 1) {}

void GrammarMatcher::set_end_bits(uint32_t* bitmask) const {
  for (int32_t id : vocabulary_->end_ids()) bitmask[id / 32] |= uint32_t(1) << (id % 32);
}

void GrammarMatcher::compute_mask(int32_t state, uint32_t* bitmask) {
  const size_t words = vocabulary_->bitmask_words();
  std::memset(bitmask, 0, words * sizeof(uint32_t));
  const std::vector<TokenVocabulary::TrieNode>& trie = vocabulary_->trie();
  const std::vector<int32_t>& node_tokens = vocabulary_->node_tokens();
  walk_states_[0] = state;
  for (size_t i = 0; i < trie.size();) {
    const TokenVocabulary::TrieNode& node = trie[i];
    const int32_t next = automaton_.step(walk_states_[node.depth - 1], node.byte);
    if (next == GrammarAutomaton::kDead) {
      i = node.subtree_end;
      continue;
    }
    walk_states_[node.depth] = next;
    for (uint32_t k = 0; k < node.n_tokens; ++k) {
      const int32_t id = node_tokens[node.first_token + k];
      bitmask[id / 32] |= uint32_t(1) << (id % 32);
    }
    ++i;
  }
  if (!automaton_.status().ok()) std::memset(bitmask, 0, words * sizeof(uint32_t));
  if (automaton_.status().ok() && automaton_.accepts(state)) set_end_bits(bitmask);
}

void GrammarMatcher::fill_next_token_bitmask(uint32_t* bitmask) {
  const size_t words = vocabulary_->bitmask_words();
  const int32_t state = current();
  if (state < 0 || !automaton_.status().ok()) {
    std::memset(bitmask, 0, words * sizeof(uint32_t));
    if (state == kTerminated || !automaton_.status().ok()) set_end_bits(bitmask);
    return;
  }
  auto it = mask_slot_.find(state);
  if (it != mask_slot_.end()) {
    std::memcpy(bitmask, masks_.data() + it->second, words * sizeof(uint32_t));
    return;
  }
  compute_mask(state, bitmask);
  if (!automaton_.status().ok()) {
    set_end_bits(bitmask);
    return;
  }
  if ((masks_.size() + words) * sizeof(uint32_t) > options_.mask_cache_bytes) {
    masks_.clear();
    mask_slot_.clear();
  }
  mask_slot_.emplace(state, masks_.size());
  masks_.insert(masks_.end(), bitmask, bitmask + words);
}

bool GrammarMatcher::accept_token(int32_t id) {
  if (id < 0 || size_t(id) >= vocabulary_->size()) return false;
  const int32_t state = current();
  if (vocabulary_->is_end(id)) {
    if (state != kTerminated && (state < 0 || !automaton_.accepts(state))) return false;
    history_.push_back(kTerminated);
    return true;
  }
  const std::string& bytes = vocabulary_->bytes(id);
  if (bytes.empty() || state < 0) return false;
  const int32_t next = automaton_.walk(state, bytes);
  if (next == GrammarAutomaton::kDead) return false;
  history_.push_back(next);
  return true;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  const int32_t state = current();
  if (state < 0) return false;
  const int32_t next = automaton_.walk(state, bytes);
  if (next == GrammarAutomaton::kDead) return false;
  history_.push_back(next);
  return true;
}

void GrammarMatcher::rollback(size_t n) {
  DI_CHECK(n <= n_steps());
  history_.resize(history_.size() - n);
}

bool GrammarMatcher::can_end() const {
  const int32_t state = current();
  return state == kTerminated || (state >= 0 && automaton_.accepts(state));
}

bool GrammarMatcher::is_terminated() const {
  const int32_t state = current();
  return state == kTerminated || (state >= 0 && automaton_.accepts(state) &&
                                  automaton_.next_bytes(state).empty());
}

uint32_t GrammarMatcher::min_bytes_to_end() {
  const int32_t state = current();
  return state >= 0 ? automaton_.bytes_to_accept(state) : 0;
}

}  // namespace deepinfer::grammar
