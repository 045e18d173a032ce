// Sequence: one stream of tokens being generated (a request with n samples has n of them), as
// the scheduler and the KV cache manager see it. No sampling parameters, no tensors.
//
// State machine (set_state checks every transition):
//   kWaiting   -> kRunning (admitted: holds blocks) | kFinished (aborted before admission)
//   kRunning   -> kPreempted (blocks freed; recomputed from its tokens when readmitted) | kFinished
//   kPreempted -> kRunning | kFinished
// Tokens only grow (prompt, then sampled tokens). n_computed counts the leading tokens whose KV
// is in the cache; tokens [n_computed, n_tokens) are what the next steps feed to the model.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/block_hash.h"
#include "engine/finish_reason.h"

namespace deepinfer {

enum class SequenceState : uint8_t { kWaiting, kRunning, kPreempted, kFinished };

class Sequence {
 public:
  // `n_kinds`: kinds of per-layer state (one block table each). `n_pending_forks`: samples
  // beyond the first that fork from this sequence once it has sampled its first token.
  Sequence(int64_t id, uint64_t request_id, int sample_index, int priority, uint64_t arrival,
           std::vector<int32_t> prompt, int n_kinds, int n_pending_forks);

  int64_t id() const { return id_; }
  uint64_t request_id() const { return request_id_; }
  int sample_index() const { return sample_index_; }
  int priority() const { return priority_; }
  uint64_t arrival() const { return arrival_; }
  // Scheduling order: lower priority value first, then earlier arrival, then lower sample index.
  bool goes_before(const Sequence& other) const;

  SequenceState state() const { return state_; }
  void set_state(SequenceState next);
  FinishReason finish_reason() const { return finish_reason_; }
  void set_finished(FinishReason reason);

  std::span<const int32_t> tokens() const { return tokens_; }
  int n_tokens() const { return int(tokens_.size()); }
  int n_prompt() const { return n_prompt_; }
  int n_output() const { return n_tokens() - n_prompt_; }
  std::span<const int32_t> output() const { return std::span(tokens_).subspan(size_t(n_prompt_)); }
  void append_token(int32_t token) { tokens_.push_back(token); }
  // Keeps tokens [0, n): n >= n_prompt and n >= n_computed (KvCacheManager::truncate also drops
  // the block hashes).
  void truncate_tokens(int n);

  int n_computed() const { return n_computed_; }
  int n_uncomputed() const { return n_tokens() - n_computed_; }
  void set_n_computed(int n);

  // Prompt tokens whose KV came from the prefix cache at first admission (for usage reports).
  int n_cached_prompt() const { return n_cached_prompt_; }
  void set_n_cached_prompt(int n) { n_cached_prompt_ = n; }

  int n_pending_forks() const { return n_pending_forks_; }
  void take_pending_fork();
  // Slots this sequence counts against max_num_seqs: itself and the samples it will fork.
  int n_slots() const { return 1 + n_pending_forks_; }

  // Kept by KvCacheManager.
  std::vector<std::vector<int32_t>>& block_tables() { return block_tables_; }  // [n_kinds][n_blocks]
  const std::vector<std::vector<int32_t>>& block_tables() const { return block_tables_; }
  std::vector<BlockHash>& block_hashes() { return block_hashes_; }  // of tokens' full blocks, in order
  const std::vector<BlockHash>& block_hashes() const { return block_hashes_; }
  int n_blocks_filed = 0;  // leading blocks of every table already filed in the prefix index

  // A sample forked from this sequence: same tokens and computed prefix, its own sample index.
  // Block tables are shared by KvCacheManager::fork.
  Sequence fork(int64_t id, int sample_index) const;

 private:
  int64_t id_;
  uint64_t request_id_;
  int sample_index_;
  int priority_;
  uint64_t arrival_;
  SequenceState state_ = SequenceState::kWaiting;
  FinishReason finish_reason_ = FinishReason::kNone;
  std::vector<int32_t> tokens_;
  int n_prompt_;
  int n_computed_ = 0;
  int n_cached_prompt_ = 0;
  int n_pending_forks_;
  std::vector<std::vector<int32_t>> block_tables_;
  std::vector<BlockHash> block_hashes_;
};

}  // namespace deepinfer
