// SequenceGrammars: the grammar matchers of the engine's constrained sequences, and sampling
// under them (structured output). Every constrained sample has its own GrammarMatcher (the n
// samples of a request diverge); the matchers of one grammar share its mask cache.
//
// Per token: while the constraint is active, the mask of the sequence's state goes to the
// Sampler (disallowed tokens get -inf; end ids are allowed exactly where the grammar accepts),
// and the sampled token advances the matcher. Before a reasoning model closes its reasoning
// (GrammarConstraint::start_after_token) tokens are sampled unmasked, and the token that closes
// it activates the constraint. A sampled token reports, in SampledToken::grammar_finish, kStop
// once the grammar is complete and nothing may follow it (an end id accepted, or a terminal
// state: the sequence stops there without spending a step on an end id) and kError once the
// matcher failed (AutomatonLimits passed, or no token allowed), so no constrained output ends in
// an invalid state except by max_tokens (finish_reason length) or an error.
//
// Budget: a grammar can be cheap to compile and still costly to match (heavy ambiguity makes every
// new state's mask a slow trie walk), and masks are computed on the engine thread, where that
// time delays every sequence. Each constrained sequence may spend GrammarBudget::burst_seconds,
// plus seconds_per_token for each of its tokens, in mask fills and accepts; past that it
// finishes with kError. Ordinary grammars stay far inside it (a cached mask is a copy, a first
// visit a few ms).
//
// Overlap: the mask a sequence samples under next is known once its previous token is accepted,
// so the engine starts computing the next masks of the step's sampling sequences on a worker
// thread of its own (one for the engine's life) before the forward pass (prefetch_masks) and waits for them after it (join_masks);
// sample() takes a prefetched mask instead of computing it. Only the first position of a
// sequence is prefetched (drafts beyond it are masked as before). Its time counts in the budget.
//
// Determinism: the mask depends only on the sequence's own tokens, never on its batch
// neighbours (the shared cache memoizes, it does not change answers). The budget is wall time,
// so whether a grammar near it is cut can depend on the machine and on what the shared cache
// already holds; the tokens of a sequence that is not cut never do.
// Engine thread only (the mask caches inside are thread-safe, the matchers are not; between
// prefetch_masks and join_masks the prefetching thread alone touches the prefetched matchers, and
// the engine thread calls nothing here).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/background_worker.h"
#include "engine/grammar_constraint.h"
#include "engine/sampler.h"
#include "grammar/grammar_matcher.h"

namespace deepinfer {

struct GrammarBudget {
  double burst_seconds = 1.0;        // engine-thread time a sequence may spend at once
  double seconds_per_token = 0.01;   // and on average per token beyond that
};

class SequenceGrammars {
 public:
  explicit SequenceGrammars(GrammarBudget budget = {}) : budget_(budget) {}
  // Tracks sequence `seq_id` under `constraint`; nothing when it is null.
  void add(int64_t seq_id, const std::shared_ptr<const GrammarConstraint>& constraint);
  // A sample forked from `parent_id` starts from a copy of the parent's matcher.
  void fork(int64_t parent_id, int64_t child_id);
  void remove(int64_t seq_id);
  bool constrains(int64_t seq_id) const { return entries_.count(seq_id) != 0; }

  // Starts computing, on another thread, the next masks of the sequences of `seq_ids` whose
  // constraint is active and overlapped; join_masks() waits for them (call it before anything
  // else here).
  void prefetch_masks(std::span<const int64_t> seq_ids);
  void join_masks();
  size_t n_masks_overlapped() const { return n_overlapped_; }

  // Sampler::sample for sequence `seq_id` (its tokens so far: `tokens`), masked when its
  // constraint is active, and the matcher advanced by the result.
  SampledToken sample(Sampler& sampler, int64_t seq_id, std::span<const float> logits, const SamplingParams& params,
                      std::span<const int32_t> tokens, int n_prompt, std::span<const int32_t> eos_token_ids,
                      uint64_t seed, int sample_index);

 private:
  struct Entry {
    std::shared_ptr<const GrammarConstraint> constraint;
    grammar::GrammarMatcher matcher;
    bool active = false;  // the constraint applies (reasoning, if any, is over)
    double seconds_left = 0;  // of its budget
    std::vector<uint32_t> next_mask;  // prefetched mask of the current state
    double next_mask_seconds = -1;    // its fill time; < 0: none prefetched
  };

  GrammarBudget budget_;
  std::unordered_map<int64_t, Entry> entries_;
  std::vector<uint32_t> mask_;  // scratch: one sequence's allowed-token bitmask
  BackgroundWorker prefetch_;   // computes prefetched masks between prefetch_masks and join_masks
  size_t n_overlapped_ = 0;     // masks sample() took prefetched
};

}  // namespace deepinfer
