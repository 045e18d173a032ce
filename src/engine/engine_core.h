// EngineCore: the engine's step loop body, single-threaded and synchronous: requests in,
// schedule -> forward -> sample -> outputs, one step per call. Engine (engine.h) runs it on its
// own thread; tests and offline benchmarks may drive it directly.
//
// Requests are validated up front (validate()): token ids in the vocabulary, sampling
// parameters in range, prompt + max_tokens within max_model_len (which is capped by what the
// KV cache can hold for one sequence). A validated request always completes: capacity
// shortfalls only delay it (the scheduler preempts and recomputes), nothing is dropped.
//
// Speculative decoding (EngineOptions::speculative): before a step, decoding sequences get up to
// k draft tokens appended (from the Drafter the method names: n-gram lookup, or the model's MTP
// block, which reads the state the previous steps' forward kept in the cache), so the step
// computes 1 + k positions for them in one chunk. Each position is then sampled exactly as plain
// decoding samples it (same sampler, same history, same per-position random number), in order;
// a draft is accepted while it equals the token sampled before it, and the first sample that
// differs is kept too. So the output, logprobs included, is token for token what plain decoding
// gives, at any temperature (the distribution is the target's by construction, not by rejection
// sampling), and since a row's logits do not depend on chunking, accepting m drafts yields m + 1
// tokens for one step. Rejected drafts are dropped before the step's blocks are filed in the
// prefix cache, so no filed block holds them; their KV slots are simply overwritten later. Drafts
// are added after scheduling, to chunks that decode one token, only where the pool has the blocks
// and the step the budget, so they never preempt or delay anything. Below the batch cap
// (speculative_max_batch), a DraftGate (draft_gate.h) chooses each sequence's draft length from
// its drafts' acceptance and the drafter's measured cost (timed per step against the forward
// pass), stops drafting for a sequence whose drafts lose, and probes again after a while.
// Under a grammar constraint (SequenceGrammars) drafts are verified the same way: each position
// is sampled under the mask of the grammar state its accepted tokens lead to, and only sampled
// tokens enter the matcher, so a rejected draft never does and needs no rollback.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/drafter.h"
#include "engine/engine_options.h"
#include "engine/kv_cache.h"
#include "engine/kv_cache_manager.h"
#include "engine/model_runner.h"
#include "engine/output_stream.h"
#include "engine/prefix_transfer.h"
#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/sequence_grammars.h"
#include "engine/step_group.h"
#include "model/causal_lm.h"

namespace deepinfer {

// A snapshot for metrics. Token counts are totals since start.
struct EngineStats {
  int n_waiting = 0;                  // sequences waiting, including preempted ones
  int n_running = 0;
  int n_kv_blocks = 0;
  int n_kv_blocks_free = 0;           // includes cached blocks nobody holds
  int n_kv_blocks_pinned = 0;         // held for transfers between workers (prefix_transfer.h)
  double kv_usage = 0.0;              // fraction of blocks held by sequences
  uint64_t n_prefix_query_tokens = 0; // tokens of admitted sequences
  uint64_t n_prefix_hit_tokens = 0;   // of those, served by the prefix cache
  uint64_t n_preemptions = 0;
  uint64_t n_steps = 0;
  uint64_t n_computed_tokens = 0;     // tokens run through the model (prefill and decode)
  uint64_t n_generated_tokens = 0;    // tokens sampled
  uint64_t n_draft_tokens = 0;        // speculative drafts verified
  uint64_t n_accepted_draft_tokens = 0;  // of those, accepted
  // Per draft position i (the i+1-th draft of a step): drafts verified there, and accepted
  // (a draft is accepted only if every one before it was, so the counts fall with i).
  std::array<uint64_t, kMaxSpeculativeTokens> n_drafts_at{}, n_accepted_at{};
  uint64_t n_draft_paused_steps = 0;  // decode steps a sequence held its drafts back (DraftGate)
};

class EngineCore {
 public:
  // Allocates the KV cache from options.kv_cache_budget() for `model` (which must outlive this).
  // An error for --speculative mtp where the model cannot draft (CausalLM::can_draft).
  static Result<std::unique_ptr<EngineCore>> create(CausalLM& model, const EngineOptions& options);

  const KvCacheInfo& kv_cache_info() const { return cache_->info(); }
  // The cache's memory (for registering it with a transport; blocks change only on this thread).
  const KvCacheView& kv_cache_view() const { return cache_->view(); }
  int max_model_len() const { return max_model_len_; }
  const CausalLMInfo& model_info() const { return model_.info(); }

  // Whether `request` can run here; the message names the offending field. Thread-safe.
  Status validate(const Request& request) const;
  // Takes a validated request; its updates go to `stream` (made for params.n samples).
  // `pinned`: blocks (from import_prefix) this request's admission reuses; released once it is
  // admitted or finished.
  void add(uint64_t request_id, Request request, std::shared_ptr<OutputStream> stream,
           RequestTiming::Clock::time_point arrival, std::vector<PinnedBlock> pinned = {});
  // Finishes every sample of the request with kAbort and frees its blocks; unknown ids are ignored.
  void abort(uint64_t request_id);
  // Finishes every unfinished request with `reason` (engine shutdown).
  void finish_all(FinishReason reason);

  // Replaces the drafter options.speculative chose: benchmarks bring their own (the server never
  // calls this). Precondition: options.speculative != kNone.
  void set_drafter(std::unique_ptr<Drafter> drafter);

  bool has_work() const { return scheduler_.has_work(); }
  // One step. Precondition: has_work().
  void step();
  // Expert parallelism (step_group.h): a step whose forward ran while the group failed (its
  // logits mean nothing) finishes every request with kError instead of sampling.
  void set_step_group(const StepGroup* group) { group_ = group; }
  // An empty forward (0 rows): a rank without work takes part in the group's exchanges.
  void step_idle();
  EngineStats stats() const;

  // Prefill/decode disaggregation (prefix_transfer.h). Engine thread only.
  // Decode side: pins what a hit of the first n_blocks blocks of `tokens` needs and this cache
  // holds, and reserves fresh blocks for the rest. nullopt (nothing held) without prefix caching
  // or when a pool lacks free blocks.
  std::optional<PrefixReservation> reserve_prefix(std::span<const int32_t> tokens, int n_blocks);
  // Files the filled `receive` blocks under their hashes; returns every block now pinned (held
  // and received), for add() or unpin().
  std::vector<PinnedBlock> import_prefix(std::span<const int32_t> tokens, const PrefixReservation& reservation);
  // Prefill side: pins the blocks filed for `slots` (kind and index; block is ignored) of the
  // prefix of `tokens`; nullopt, pinning nothing, if one is not filed.
  std::optional<std::vector<PinnedBlock>> pin_prefix(std::span<const int32_t> tokens, std::span<const PinnedBlock> slots);
  void unpin(std::span<const PinnedBlock> blocks);
  // The (kind, index) slots a hit of the first n_blocks blocks needs (block = -1).
  std::vector<PinnedBlock> prefix_hit_slots(int n_blocks) const;
  // Blocks pinned by the calls above and not yet released.
  int n_pinned_blocks() const { return n_pinned_blocks_; }

 private:
  struct RequestState {
    Request request;
    std::shared_ptr<OutputStream> stream;
    uint64_t seed = 0;
    int max_tokens = 0;                 // resolved: params.max_tokens or what max_model_len leaves
    int n_cached_tokens = 0;
    RequestTiming timing;
    std::vector<Sequence*> live;        // unfinished samples
    std::vector<PinnedBlock> pinned;    // until admission (add())
  };

  EngineCore(CausalLM& model, const EngineOptions& options, std::unique_ptr<KvCache> cache);
  // Appends a sampled token to seq, finishes seq if it should stop, and pushes the update.
  void emit(RequestState& r, Sequence& seq, SampledToken sampled, RequestTiming::Clock::time_point now);
  // Pushes the update of an accepted draft (already seq's token at token_index): like emit()
  // without the append. Returns false once seq finished (it is destroyed).
  bool emit_accepted(RequestState& r, Sequence& seq, int token_index, SampledToken sampled,
                     RequestTiming::Clock::time_point now);
  // Why a sample whose tokens end at `last` with n_output outputs stops (kNone: it goes on).
  FinishReason stop_reason(const RequestState& r, int32_t last, int n_output) const;
  // Speculative decoding: extends the step's decode chunks with draft tokens (appended to their
  // sequences, blocks allocated, within the token budget) while few enough sequences decode.
  // Returns the seconds the drafter took (0 where nothing was proposed).
  double add_drafts(SchedulerOutput& out);
  // Finishes one sample: frees its blocks and drops it from r.live (seq is destroyed).
  void finish_sample(RequestState& r, Sequence& seq, FinishReason reason, RequestTiming::Clock::time_point now);
  // Finishes every live sample of a request with `reason`, pushes their last updates, forgets it.
  void finish_request(std::map<uint64_t, RequestState>::iterator it, FinishReason reason);

  CausalLM& model_;
  EngineOptions options_;
  std::unique_ptr<KvCache> cache_;
  KvCacheManager kv_;
  Scheduler scheduler_;
  ModelRunner runner_;
  Sampler sampler_;
  SequenceGrammars grammars_;  // matchers of the constrained sequences
  std::unique_ptr<Drafter> drafter_;  // null without speculation
  DraftGate draft_gate_;
  int max_model_len_;
  std::map<uint64_t, RequestState> requests_;
  const StepGroup* group_ = nullptr;
  int64_t next_seq_id_ = 0;
  uint64_t n_steps_ = 0, n_computed_tokens_ = 0, n_generated_tokens_ = 0;
  uint64_t n_draft_tokens_ = 0, n_accepted_draft_tokens_ = 0;
  int n_pinned_blocks_ = 0;
  std::array<uint64_t, kMaxSpeculativeTokens> n_drafts_at_{}, n_accepted_at_{};
};

}  // namespace deepinfer
