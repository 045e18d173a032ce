// MtpDrafter: drafts from the model's own MTP block (CausalLM::draft; DeepSeek-V4 loaded with
// ModelOptions::mtp_drafting): greedy, chained, from the state the model's forward kept in the
// cache for each sequence's computed positions. The model and cache outlive it.
#pragma once

#include "engine/drafter.h"
#include "engine/kv_cache.h"
#include "model/causal_lm.h"

namespace deepinfer {

class MtpDrafter final : public Drafter {
 public:
  // Precondition: model.can_draft(), and `cache` laid out by its kv_kinds.
  MtpDrafter(CausalLM& model, const KvCache& cache);
  std::vector<std::vector<int32_t>> propose(std::span<const DraftTarget> targets) override;

 private:
  CausalLM& model_;
  const KvCache& cache_;
  std::vector<DraftQuery> queries_;
  std::vector<int32_t> drafts_;
};

}  // namespace deepinfer
