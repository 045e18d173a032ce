#include "engine/sequence.h"

#include <tuple>

#include "core/check.h"

namespace deepinfer {

Sequence::Sequence(int64_t id, uint64_t request_id, int sample_index, int priority, uint64_t arrival,
                   std::vector<int32_t> prompt, int n_kinds, int n_pending_forks)
    : id_(id),
      request_id_(request_id),
      sample_index_(sample_index),
      priority_(priority),
      arrival_(arrival),
      tokens_(std::move(prompt)),
      n_prompt_(int(tokens_.size())),
      n_pending_forks_(n_pending_forks),
      block_tables_(size_t(n_kinds)) {
  DI_CHECK(n_prompt_ > 0 && n_kinds > 0 && n_pending_forks >= 0);
}

bool Sequence::goes_before(const Sequence& other) const {
  return std::tie(priority_, arrival_, sample_index_) <
         std::tie(other.priority_, other.arrival_, other.sample_index_);
}

void Sequence::set_state(SequenceState next) {
  using S = SequenceState;
  bool allowed = false;
  switch (state_) {
    case S::kWaiting: allowed = next == S::kRunning || next == S::kFinished; break;
    case S::kRunning: allowed = next == S::kPreempted || next == S::kFinished; break;
    case S::kPreempted: allowed = next == S::kRunning || next == S::kFinished; break;
    case S::kFinished: break;
  }
  DI_CHECK_MSG(allowed, "sequence %lld: state %d -> %d", (long long)id_, int(state_), int(next));
  state_ = next;
}

void Sequence::set_finished(FinishReason reason) {
  DI_CHECK(reason != FinishReason::kNone);
  set_state(SequenceState::kFinished);
  finish_reason_ = reason;
}

void Sequence::truncate_tokens(int n) {
  DI_CHECK(n >= n_prompt_ && n >= n_computed_ && n <= n_tokens());
  tokens_.resize(size_t(n));
}

void Sequence::set_n_computed(int n) {
  DI_CHECK(n >= 0 && n <= n_tokens());
  n_computed_ = n;
}

void Sequence::take_pending_fork() {
  DI_CHECK(n_pending_forks_ > 0);
  --n_pending_forks_;
}

Sequence Sequence::fork(int64_t id, int sample_index) const {
  DI_CHECK(state_ == SequenceState::kRunning);
  Sequence child(id, request_id_, sample_index, priority_, arrival_, tokens_, int(block_tables_.size()), 0);
  child.n_prompt_ = n_prompt_;
  child.n_computed_ = n_computed_;
  child.n_cached_prompt_ = n_cached_prompt_;
  child.block_hashes_ = block_hashes_;
  child.state_ = SequenceState::kRunning;
  return child;
}

}  // namespace deepinfer
