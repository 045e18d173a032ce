#include "grammar/grammar_matcher.h"

#include <cstring>

#include "core/check.h"

namespace deepinfer::grammar {

GrammarMatcher::GrammarMatcher(std::shared_ptr<GrammarMaskCache> cache)
    : cache_(std::move(cache)), history_{cache_->initial_state()} {}

GrammarMatcher::GrammarMatcher(const CompiledGrammar& grammar,
                               std::shared_ptr<const TokenVocabulary> vocabulary,
                               MatcherOptions options)
    : GrammarMatcher(std::make_shared<GrammarMaskCache>(grammar, std::move(vocabulary), options)) {}

void GrammarMatcher::fill_next_token_bitmask(uint32_t* bitmask) {
  const int32_t state = current();
  if (state >= 0) {
    cache_->fill_mask(state, bitmask);
    return;
  }
  // Terminated, or a grammar that matches nothing (status() fails): only end ids.
  std::memset(bitmask, 0, vocabulary().bitmask_words() * sizeof(uint32_t));
  {
    for (int32_t id : vocabulary().end_ids()) bitmask[id / 32] |= uint32_t(1) << (id % 32);
  }
}

bool GrammarMatcher::accept_token(int32_t id) {
  const TokenVocabulary& vocab = vocabulary();
  if (id < 0 || size_t(id) >= vocab.size()) return false;
  const int32_t state = current();
  if (vocab.is_end(id)) {
    if (state != kTerminated && (state < 0 || !cache_->accepts(state))) return false;
    history_.push_back(kTerminated);
    return true;
  }
  const std::string& bytes = vocab.bytes(id);
  if (bytes.empty() || state < 0) return false;
  const int32_t next = cache_->walk(state, bytes);
  if (next == GrammarAutomaton::kDead) return false;
  history_.push_back(next);
  return true;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  const int32_t state = current();
  if (state < 0) return false;
  const int32_t next = cache_->walk(state, bytes);
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
  return state == kTerminated || (state >= 0 && cache_->accepts(state));
}

bool GrammarMatcher::is_terminated() const {
  const int32_t state = current();
  return state == kTerminated || (state >= 0 && cache_->accepts(state) && !cache_->can_continue(state));
}

uint32_t GrammarMatcher::min_bytes_to_end() {
  const int32_t state = current();
  return state >= 0 ? cache_->bytes_to_accept(state) : 0;
}

}  // namespace deepinfer::grammar
