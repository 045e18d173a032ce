// SchedulerSim: drives Scheduler + KvCacheManager step by step without a model, standing in for
// the model runner and sampler, and checks the invariants after every step:
//   - the pool's own structures agree (free queue, counts, prefix index);
//   - every block's ref count equals the number of live sequences' tables holding it, and
//     free + in use = total;
//   - waiting and preempted sequences hold no blocks; a running sequence's table covers exactly
//     its computed tokens;
//   - a shadow KV cache per kind (the token id written at each block slot) holds, for every
//     running sequence, exactly its own tokens at positions [0, n_computed) — of a lookback kind,
//     at the positions its next step reads — so a prefix hit, fork, copy-on-write, eviction or
//     window release that hands a sequence the wrong KV is caught;
//   - every filed block's shadow contents are the tokens its hash stands for;
//   - a written block is never shared or filed (filed blocks are immutable);
//   - the step respects the token budget and max_num_seqs; no sequence is scheduled twice.
// "Sampling" is a hash of the sequence's tokens and sample index, so each sample's output is a
// function of its prompt alone: any schedule must produce the same outputs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "engine/kv_cache_manager.h"
#include "engine/scheduler.h"

namespace deepinfer::test {

// One step as scheduled, recorded before any sequence finished (finishing destroys it).
struct SimChunk {
  uint64_t request_id = 0;
  int n_new = 0;
  bool sample = false;
  int n_cached_prompt = 0;
};
struct SimStep {
  std::vector<SimChunk> chunks;
  int n_preempted = 0;
  size_t n_block_copies = 0;
  const SimChunk* of(uint64_t request_id) const;
};

class SchedulerSim {
 public:
  // One kind per lookback (kv_kind.h), each with a pool of n_blocks.
  SchedulerSim(int n_blocks, int block_size, SchedulerOptions options, bool prefix_caching = true,
               std::vector<int> lookbacks = {0});

  // Adds a request of `n` samples, each finishing after n_output tokens. Returns its request id.
  uint64_t add(std::vector<int32_t> prompt, int n_output, int priority = 0, int n = 1);
  // Finishes every sequence of a request with kAbort.
  void abort(uint64_t request_id);
  SimStep step();
  // Steps until no work is left (aborting the test after max_steps).
  int run(int max_steps = 100000);

  // Output tokens of finished samples, by (request id, sample index).
  const std::map<std::pair<uint64_t, int>, std::vector<int32_t>>& outputs() const { return outputs_; }
  int vocab() const { return 1000; }
  static int32_t next_token(std::span<const int32_t> tokens, int sample_index);

  KvCacheManager kv;
  Scheduler scheduler;

 private:
  void check_invariants();
  void check_kv(const Sequence& seq);
  void finish(Sequence* seq, FinishReason reason);

  int block_size_;
  std::vector<KvKind> kinds_;
  uint64_t next_request_ = 0;
  int64_t next_seq_ = 0;
  std::map<uint64_t, int> n_output_;  // request id -> tokens per sample
  std::set<Sequence*> live_;
  std::vector<std::vector<std::vector<int32_t>>> shadow_;  // [kind][n_blocks][block_size] token written, -1 none
  std::map<std::pair<uint64_t, int>, std::vector<int32_t>> outputs_;
};

}  // namespace deepinfer::test
