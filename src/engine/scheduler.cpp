#include "engine/scheduler.h"

#include <algorithm>

#include "core/check.h"

namespace deepinfer {

int SchedulerOutput::n_tokens() const {
  int n = 0;
  for (const auto& c : chunks) n += c.n_new;
  return n;
}

Scheduler::Scheduler(SchedulerOptions options, KvCacheManager& kv) : options_(options), kv_(kv) {
  DI_CHECK(options_.max_num_batched_tokens > 0 && options_.max_num_seqs > 0);
}

Sequence& Scheduler::add(std::unique_ptr<Sequence> seq) {
  DI_CHECK(seq->state() == SequenceState::kWaiting && seq->n_computed() == 0);
  DI_CHECK(seq->n_slots() <= options_.max_num_seqs);
  Sequence* s = seq.get();
  DI_CHECK(sequences_.emplace(s->id(), std::move(seq)).second);
  waiting_.insert(s);
  return *s;
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int budget = options_.max_num_batched_tokens;

  if (!waiting_.empty() && (*waiting_.begin())->id() == blocked_head_id_ && !running_.empty() &&
      running_.back()->priority() > (*waiting_.begin())->priority()) {
    preempt_last_running();
    ++out.n_preempted;
  }
  const int n_preempted_for_priority = out.n_preempted;
  blocked_head_id_ = -1;

  int n_decodes_later = int(std::count_if(running_.begin(), running_.end(),
                                          [](const Sequence* s) { return s->n_uncomputed() == 1; }));
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence* seq = running_[i];
    DI_CHECK(seq->n_uncomputed() > 0);
    const bool decode = seq->n_uncomputed() == 1;
    if (decode) --n_decodes_later;
    const int n_new = std::min(seq->n_uncomputed(), decode ? budget : budget - n_decodes_later);
    if (n_new <= 0) continue;
    bool allocated = false;
    while (!(allocated = kv_.allocate(*seq, n_new, out.block_copies))) {
      Sequence* victim = running_.back();
      if (victim != seq && victim->n_uncomputed() == 1) --n_decodes_later;
      preempt_last_running();
      ++out.n_preempted;
      if (victim == seq) break;
    }
    if (!allocated) break;  // seq was the last running sequence
    out.chunks.push_back({seq, n_new, seq->n_computed() + n_new == seq->n_tokens()});
    budget -= n_new;
  }

  while (out.n_preempted == n_preempted_for_priority && !waiting_.empty() && budget > 0) {
    Sequence* seq = *waiting_.begin();
    if (n_running_slots_ + seq->n_slots() > options_.max_num_seqs) {
      blocked_head_id_ = seq->id();
      break;
    }
    const int n_hit = kv_.n_prefix_hit_tokens(*seq);
    const int n_new = std::min(seq->n_tokens() - n_hit, budget);
    if (!kv_.admit(*seq, n_hit, n_new)) {
      blocked_head_id_ = seq->id();
      break;
    }
    if (seq->state() == SequenceState::kWaiting) seq->set_n_cached_prompt(std::min(n_hit, seq->n_prompt()));
    waiting_.erase(waiting_.begin());
    seq->set_state(SequenceState::kRunning);
    insert_running(seq);
    out.chunks.push_back({seq, n_new, n_hit + n_new == seq->n_tokens()});
    budget -= n_new;
  }
  return out;
}

void Scheduler::update(const SchedulerOutput& out) {
  for (const auto& c : out.chunks) {
    DI_CHECK(c.seq->state() == SequenceState::kRunning);
    c.seq->set_n_computed(c.seq->n_computed() + c.n_new);
    kv_.file_computed_blocks(*c.seq);
  }
}

Sequence& Scheduler::fork(Sequence& parent, int64_t id, int sample_index) {
  parent.take_pending_fork();
  --n_running_slots_;
  auto child = std::make_unique<Sequence>(parent.fork(id, sample_index));
  kv_.fork(parent, *child);
  Sequence* c = child.get();
  DI_CHECK(sequences_.emplace(id, std::move(child)).second);
  insert_running(c);
  return *c;
}

void Scheduler::finish(Sequence& seq, FinishReason reason) {
  if (seq.state() == SequenceState::kRunning) {
    auto it = std::find(running_.begin(), running_.end(), &seq);
    DI_CHECK(it != running_.end());
    running_.erase(it);
    n_running_slots_ -= seq.n_slots();
    kv_.free(seq);
  } else {
    DI_CHECK(waiting_.erase(&seq) == 1);
  }
  seq.set_finished(reason);
  DI_CHECK(sequences_.erase(seq.id()) == 1);
}

void Scheduler::insert_running(Sequence* seq) {
  running_.insert(std::upper_bound(running_.begin(), running_.end(), seq, Before{}), seq);
  n_running_slots_ += seq->n_slots();
}

void Scheduler::preempt_last_running() {
  Sequence* victim = running_.back();
  running_.pop_back();
  n_running_slots_ -= victim->n_slots();
  kv_.free(*victim);
  victim->set_n_computed(0);
  victim->set_state(SequenceState::kPreempted);
  waiting_.insert(victim);
  ++n_preemptions_;
}

}  // namespace deepinfer
