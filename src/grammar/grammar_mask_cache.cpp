#include "grammar/grammar_mask_cache.h"

#include <cstring>

namespace deepinfer::grammar {

GrammarMaskCache::GrammarMaskCache(const CompiledGrammar& grammar,
                                   std::shared_ptr<const TokenVocabulary> vocabulary,
                                   MatcherOptions options)
    : vocabulary_(std::move(vocabulary)),
      options_(options),
      automaton_(grammar.grammar(), options.automaton),
      initial_(automaton_.initial_state()),
      walk_states_(vocabulary_->max_token_bytes() + 1),
      path_(vocabulary_->max_token_bytes(), '\0') {}

int32_t GrammarMaskCache::walk(int32_t state, std::string_view bytes) {
  std::lock_guard lock(mu_);
  return automaton_.walk(state, bytes);
}

bool GrammarMaskCache::accepts(int32_t state) {
  std::lock_guard lock(mu_);
  return automaton_.accepts(state);
}

bool GrammarMaskCache::can_continue(int32_t state) {
  std::lock_guard lock(mu_);
  return !automaton_.next_bytes(state).empty();
}

uint32_t GrammarMaskCache::bytes_to_accept(int32_t state) {
  std::lock_guard lock(mu_);
  return automaton_.bytes_to_accept(state);
}

Status GrammarMaskCache::status() {
  std::lock_guard lock(mu_);
  return automaton_.status();
}

size_t GrammarMaskCache::n_cached_masks() {
  std::lock_guard lock(mu_);
  return mask_slot_.size();
}

void GrammarMaskCache::set_end_bits(uint32_t* bitmask) const {
  for (int32_t id : vocabulary_->end_ids()) bitmask[id / 32] |= uint32_t(1) << (id % 32);
}

void GrammarMaskCache::compute_mask(int32_t state, uint32_t* bitmask) {
  if (automaton_.accepts(state)) set_end_bits(bitmask);
  if (automaton_.next_bytes(state).empty()) return;
  const std::shared_ptr<const FrameMask> frame = frame_mask(state);
  if (!frame) return;
  for (size_t w = 0; w < frame->accepted.size(); ++w) bitmask[w] |= frame->accepted[w];
  for (const FrameMask::Uncertain& u : frame->uncertain) {
    const int32_t base = automaton_.walk(state, u.prefix);
    if (base != GrammarAutomaton::kDead) walk_subtree(u.node, base, bitmask);
  }
}

std::shared_ptr<const FrameMask> GrammarMaskCache::frame_mask(int32_t state) {
  const int32_t detached = automaton_.detach(state);
  if (detached == GrammarAutomaton::kDead) return nullptr;
  auto it = frame_of_.find(detached);
  if (it != frame_of_.end()) return it->second;
  const std::string key = automaton_.frame_key(detached);
  FrameMaskStore& store = vocabulary_->frame_masks();
  std::shared_ptr<const FrameMask> frame = store.find(key);
  if (!frame) {
    frame = compute_frame_mask(detached);
    if (!automaton_.status().ok()) return nullptr;
    frame = store.insert(key, std::move(frame));
  }
  frame_of_.emplace(detached, frame);
  frame_bytes_ += frame->bytes();
  return frame;
}

std::shared_ptr<const FrameMask> GrammarMaskCache::compute_frame_mask(int32_t detached) {
  const std::vector<TokenVocabulary::TrieNode>& trie = vocabulary_->trie();
  const std::vector<int32_t>& node_tokens = vocabulary_->node_tokens();
  auto frame = std::make_shared<FrameMask>();
  frame->accepted.assign(vocabulary_->bitmask_words(), 0);
  uint32_t* bitmask = frame->accepted.data();
  walk_states_[0] = detached;
  const ByteSet loops = self_loops(detached);
  for (size_t i = 0; i < trie.size();) {
    const TokenVocabulary::TrieNode& node = trie[i];
    const int32_t from = walk_states_[node.depth - 1];
    // A subtree whose every byte loops back to the walk's state is accepted whole, unstepped.
    if (from == detached && vocabulary_->subtree_bytes(i).subset_of(loops)) {
      for (uint32_t k = node.first_token, end = vocabulary_->subtree_tokens_end(i); k < end; ++k) {
        const int32_t id = node_tokens[k];
        bitmask[id / 32] |= uint32_t(1) << (id % 32);
      }
      i = node.subtree_end;
      continue;
    }
    const int32_t next = automaton_.step(from, node.byte);
    if (next == GrammarAutomaton::kDead) {
      i = node.subtree_end;
      continue;
    }
    if (automaton_.open(next)) {
      frame->uncertain.push_back({uint32_t(i), path_.substr(0, node.depth - 1u)});
      i = node.subtree_end;
      continue;
    }
    path_[node.depth - 1u] = char(node.byte);
    walk_states_[node.depth] = next;
    for (uint32_t k = 0; k < node.n_tokens; ++k) {
      const int32_t id = node_tokens[node.first_token + k];
      bitmask[id / 32] |= uint32_t(1) << (id % 32);
    }
    ++i;
  }
  return frame;
}

void GrammarMaskCache::walk_subtree(uint32_t root, int32_t base, uint32_t* bitmask) {
  const std::vector<TokenVocabulary::TrieNode>& trie = vocabulary_->trie();
  const std::vector<int32_t>& node_tokens = vocabulary_->node_tokens();
  walk_states_[trie[root].depth - 1u] = base;
  for (size_t i = root, end = trie[root].subtree_end; i < end;) {
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
}

ByteSet GrammarMaskCache::self_loops(int32_t state) {
  ByteSet loops;
  for (unsigned b = 0; b < 256; ++b) {
    if (automaton_.next_bytes(state).contains(uint8_t(b)) && automaton_.step(state, uint8_t(b)) == state) {
      loops.add(uint8_t(b));
    }
  }
  return loops;
}

void GrammarMaskCache::fill_mask(int32_t state, uint32_t* bitmask) {
  const size_t words = vocabulary_->bitmask_words();
  std::lock_guard lock(mu_);
  std::memset(bitmask, 0, words * sizeof(uint32_t));
  if (!automaton_.status().ok()) {
    set_end_bits(bitmask);
    return;
  }
  auto it = mask_slot_.find(state);
  if (it != mask_slot_.end()) {
    std::memcpy(bitmask, masks_.data() + it->second, words * sizeof(uint32_t));
    return;
  }
  compute_mask(state, bitmask);
  if (!automaton_.status().ok()) {
    std::memset(bitmask, 0, words * sizeof(uint32_t));
    set_end_bits(bitmask);
    return;
  }
  if ((masks_.size() + words) * sizeof(uint32_t) + frame_bytes_ > options_.mask_cache_bytes) {
    masks_.clear();
    mask_slot_.clear();
    frame_of_.clear();
    frame_bytes_ = 0;
  }
  mask_slot_.emplace(state, masks_.size());
  masks_.insert(masks_.end(), bitmask, bitmask + words);
}

}  // namespace deepinfer::grammar
