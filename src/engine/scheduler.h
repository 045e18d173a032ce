// Scheduler: turns waiting and running sequences into one step's work under a token budget.
// Pure logic over Sequence and KvCacheManager; no tensors, no model.
//
// A step is a list of chunks, "n_new tokens of sequence s": a decode token and a prefill chunk are
// the same thing. Each step:
//   1. Running sequences, in scheduling order (priority, then arrival; Sequence::goes_before),
//      each get min(uncomputed tokens, budget left) tokens, minus one token held back for every
//      later running sequence that has a single token to decode, so a long prefill never stalls
//      decodes. When the pool lacks blocks, the last running sequence in that order (the newest
//      of the lowest priority) is preempted: its blocks are freed and it goes back to waiting, to
//      be recomputed from its tokens. It may be the sequence asking.
//   2. If nothing was preempted for room: waiting sequences, in the same order, are admitted
//      while the budget, max_num_seqs and the pool allow, each taking its cached prefix from the
//      prefix cache. The first that does not fit stops admission (no overtaking).
//   0. Priority: when the first waiting sequence did not fit in the previous step and has a
//      higher priority (lower value) than the last running sequence, that one is preempted at the
//      start of the step, one per step, until the waiting one fits. Equal priorities never
//      preempt each other this way (no thrashing between arrivals).
// Progress: the first running sequence is never preempted for a later one, and one sequence
// alone always fits (requests longer than the pool are refused before they get here), so the
// oldest request always advances: no deadlock, no request dropped.
//
// After the forward, update() advances n_computed and files new full blocks in the prefix cache.
// The caller then appends sampled tokens, forks samples, and finishes sequences.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "engine/kv_cache_manager.h"
#include "engine/sequence.h"

namespace deepinfer {

struct SchedulerOptions {
  int max_num_batched_tokens = 2048;  // tokens per step, prefill chunks and decodes together
  int max_num_seqs = 256;             // running sequences (samples still to fork count too)
};

struct ScheduledChunk {
  Sequence* seq = nullptr;
  int n_new = 0;         // tokens [seq->n_computed(), + n_new) are computed this step
  bool sample = false;   // the chunk ends at the sequence's last token: its logits are sampled
  int n_logit_rows = 1;  // with sample: logits of the chunk's last n rows (> 1 when verifying drafts)
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;
  std::vector<BlockCopy> block_copies;  // to perform in order, before the forward
  int n_preempted = 0;
  int n_tokens() const;
};

class Scheduler {
 public:
  Scheduler(SchedulerOptions options, KvCacheManager& kv);

  const SchedulerOptions& options() const { return options_; }
  int n_waiting() const { return int(waiting_.size()); }
  int n_running() const { return int(running_.size()); }
  bool has_work() const { return !waiting_.empty() || !running_.empty(); }
  uint64_t n_preemptions() const { return n_preemptions_; }
  const std::vector<Sequence*>& running() const { return running_; }  // in scheduling order

  // Takes a new waiting sequence (state kWaiting, no blocks); returns it.
  Sequence& add(std::unique_ptr<Sequence> seq);
  SchedulerOutput schedule();
  // Records that the step's chunks were computed.
  void update(const SchedulerOutput& out);
  // A new running sample of a running parent, sharing its blocks (the parent's pending fork).
  Sequence& fork(Sequence& parent, int64_t id, int sample_index);
  // Frees seq's blocks, marks it finished and destroys it. Any state but kFinished.
  void finish(Sequence& seq, FinishReason reason);

 private:
  struct Before {
    bool operator()(const Sequence* a, const Sequence* b) const { return a->goes_before(*b); }
  };
  void insert_running(Sequence* seq);
  void preempt_last_running();

  SchedulerOptions options_;
  KvCacheManager& kv_;
  std::map<int64_t, std::unique_ptr<Sequence>> sequences_;  // every unfinished sequence, by id
  std::set<Sequence*, Before> waiting_;  // kWaiting and kPreempted, in scheduling order
  std::vector<Sequence*> running_;   // kRunning, in scheduling order
  int n_running_slots_ = 0;          // sum of n_slots() over running_
  uint64_t n_preemptions_ = 0;
  int64_t blocked_head_id_ = -1;     // the waiting sequence that stopped admission last step; -1: none
};

}  // namespace deepinfer
