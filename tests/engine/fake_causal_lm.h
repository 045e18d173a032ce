// FakeCausalLM: a deterministic stand-in for a model, for engine tests without weights.
//
// forward() writes, for every row and layer, a record {token, position, layer, magic} into the
// row's KV slot (through its sequence's block table), then computes each logit row from what it
// reads back from the cache: every position [0, position] of that sequence, in every layer. A
// record at the wrong place aborts the test; the logits are a hash of the token ids read. So a
// scheduler or cache bug that hands a sequence the wrong KV changes (or kills) its output, while
// the true output depends only on the sequence's own tokens (batch invariance by construction).
// With a window (window_lookback > 0) it keeps a second kind, as DeepSeek-V4 does, holding the
// same records, and reads it only where a window may: positions >= the step's first new token
// minus the lookback; the tokens read there enter the logits too. With `drafting` it drafts
// (CausalLM::draft) its own greedy continuation, from the tokens its records kind holds at the
// query's positions [0, n_ctx) and the query's token: drafts that greedy verification accepts
// (with drafts_wrong, each draft is the id after the greedy one instead: always rejected greedily).
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

#include "model/causal_lm.h"

namespace deepinfer::test {

class FakeCausalLM final : public CausalLM {
 public:
  // kv_lora_rank 8 and rope 4: 48 B/token/layer in f32, 24 in bf16, 20 in fp8; all hold a record.
  explicit FakeCausalLM(int vocab_size = 96, int n_layers = 2, std::vector<int32_t> eos = {1},
                        int window_lookback = 0);

  const CausalLMInfo& info() const override { return info_; }
  Result<std::vector<KvKindSpec>> kv_kinds(DType cache_dtype, int block_size) const override;
  void forward(const ForwardBatch& batch, const KvCacheView& kv, float* logits) override;
  bool can_draft() const override { return drafting; }
  void draft(std::span<const DraftQuery> queries, const KvCacheView& kv, int32_t* drafts) override;

  // The logits after `tokens` (what forward computes for the row of the last token).
  static void reference_logits(std::span<const int32_t> tokens, std::span<float> logits);

  std::chrono::microseconds forward_delay{0};  // a step's minimum duration (for timing tests)
  // > 0: the next token after t is by far the likeliest 2 + (t - 1) % cycle (read from the cache
  // like the rest), so greedy output cycles through [2, 2 + cycle): text that repeats itself.
  int cycle = 0;
  bool drafting = false;
  bool drafts_wrong = false;  // drafts are the greedy continuation's tokens plus one (never accepted greedily)
  int64_t n_draft_queries = 0;
  int64_t n_forward_calls = 0;
  int64_t n_rows = 0;
  int64_t max_rows = 0;  // largest batch seen

 private:
  CausalLMInfo info_;
  int window_lookback_;
};

}  // namespace deepinfer::test
