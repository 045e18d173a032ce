#include "engine/sequence_grammars.h"

#include <algorithm>
#include <chrono>

#include "core/check.h"

namespace deepinfer {

void SequenceGrammars::add(int64_t seq_id, const std::shared_ptr<const GrammarConstraint>& constraint) {
  if (!constraint) return;
  Entry e{constraint, grammar::GrammarMatcher(constraint->masks), constraint->start_after_token < 0,
          budget_.burst_seconds, {}, -1};
  DI_CHECK(entries_.emplace(seq_id, std::move(e)).second);
}

void SequenceGrammars::fork(int64_t parent_id, int64_t child_id) {
  auto it = entries_.find(parent_id);
  if (it == entries_.end()) return;
  Entry copy = it->second;
  DI_CHECK(entries_.emplace(child_id, std::move(copy)).second);
}

void SequenceGrammars::remove(int64_t seq_id) { entries_.erase(seq_id); }

void SequenceGrammars::prefetch_masks(std::span<const int64_t> seq_ids) {
  join_masks();
  std::vector<Entry*> todo;
  for (int64_t id : seq_ids) {
    auto it = entries_.find(id);
    if (it != entries_.end() && it->second.active && it->second.constraint->overlap_masks) todo.push_back(&it->second);
  }
  if (todo.empty()) return;
  prefetch_.start([todo = std::move(todo)] {
    for (Entry* e : todo) {
      const auto t0 = std::chrono::steady_clock::now();
      e->next_mask.resize(e->matcher.vocabulary().bitmask_words());
      e->matcher.fill_next_token_bitmask(e->next_mask.data());
      e->next_mask_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  });
}

void SequenceGrammars::join_masks() {
  prefetch_.wait();
}

SampledToken SequenceGrammars::sample(Sampler& sampler, int64_t seq_id, std::span<const float> logits,
                                      const SamplingParams& params, std::span<const int32_t> tokens, int n_prompt,
                                      std::span<const int32_t> eos_token_ids, uint64_t seed, int sample_index) {
  auto it = entries_.find(seq_id);
  if (it == entries_.end())
    return sampler.sample(logits, params, tokens, n_prompt, eos_token_ids, seed, sample_index);
  Entry& e = it->second;
  if (!e.active) {
    SampledToken out = sampler.sample(logits, params, tokens, n_prompt, eos_token_ids, seed, sample_index);
    e.active = out.token == e.constraint->start_after_token;
    return out;
  }
  using Clock = std::chrono::steady_clock;
  double fill_seconds = 0;
  if (e.next_mask_seconds >= 0) {
    mask_.swap(e.next_mask);
    fill_seconds = e.next_mask_seconds;
    e.next_mask_seconds = -1;
    ++n_overlapped_;
  } else {
    const auto t0 = Clock::now();
    mask_.resize(e.matcher.vocabulary().bitmask_words());
    e.matcher.fill_next_token_bitmask(mask_.data());
    fill_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  if (std::all_of(mask_.begin(), mask_.end(), [](uint32_t w) { return w == 0; })) {
    // No token and no end allowed: the grammar cannot go on (a vocabulary without end ids).
    SampledToken out = sampler.sample(logits, params, tokens, n_prompt, eos_token_ids, seed, sample_index);
    out.grammar_finish = FinishReason::kError;
    return out;
  }
  SampledToken out = sampler.sample(logits, params, tokens, n_prompt, eos_token_ids, seed, sample_index, mask_);
  const auto t2 = Clock::now();
  const bool accepted = e.matcher.accept_token(out.token);
  e.seconds_left += budget_.seconds_per_token - fill_seconds - std::chrono::duration<double>(Clock::now() - t2).count();
  if (!accepted || !e.matcher.status().ok() || e.seconds_left < 0) {
    out.grammar_finish = FinishReason::kError;
  } else if (e.matcher.is_terminated()) {
    out.grammar_finish = FinishReason::kStop;
  }
  return out;
}

}  // namespace deepinfer
