#include "engine/sequence_grammars.h"

#include <algorithm>
#include <chrono>

#include "core/check.h"

namespace deepinfer {

void SequenceGrammars::add(int64_t seq_id, const std::shared_ptr<const GrammarConstraint>& constraint) {
  if (!constraint) return;
  Entry e{constraint, grammar::GrammarMatcher(constraint->masks), constraint->start_after_token < 0,
          budget_.burst_seconds};
  DI_CHECK(entries_.emplace(seq_id, std::move(e)).second);
}

void SequenceGrammars::fork(int64_t parent_id, int64_t child_id) {
  auto it = entries_.find(parent_id);
  if (it == entries_.end()) return;
  Entry copy = it->second;
  DI_CHECK(entries_.emplace(child_id, std::move(copy)).second);
}

void SequenceGrammars::remove(int64_t seq_id) { entries_.erase(seq_id); }

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
  const auto t0 = Clock::now();
  mask_.resize(e.matcher.vocabulary().bitmask_words());
  e.matcher.fill_next_token_bitmask(mask_.data());
  const auto t1 = Clock::now();
  if (std::all_of(mask_.begin(), mask_.end(), [](uint32_t w) { return w == 0; })) {
    // No token and no end allowed: the grammar cannot go on (a vocabulary without end ids).
    SampledToken out = sampler.sample(logits, params, tokens, n_prompt, eos_token_ids, seed, sample_index);
    out.grammar_finish = FinishReason::kError;
    return out;
  }
  SampledToken out = sampler.sample(logits, params, tokens, n_prompt, eos_token_ids, seed, sample_index, mask_);
  const auto t2 = Clock::now();
  const bool accepted = e.matcher.accept_token(out.token);
  e.seconds_left += budget_.seconds_per_token -
                    std::chrono::duration<double>((t1 - t0) + (Clock::now() - t2)).count();
  if (!accepted || !e.matcher.status().ok() || e.seconds_left < 0) {
    out.grammar_finish = FinishReason::kError;
  } else if (e.matcher.is_terminated()) {
    out.grammar_finish = FinishReason::kStop;
  }
  return out;
}

}  // namespace deepinfer
