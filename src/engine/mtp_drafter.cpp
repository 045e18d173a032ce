#include "engine/mtp_drafter.h"

#include "core/check.h"

namespace deepinfer {

MtpDrafter::MtpDrafter(CausalLM& model, const KvCache& cache) : model_(model), cache_(cache) {
  DI_CHECK(model.can_draft());
}

std::vector<std::vector<int32_t>> MtpDrafter::propose(std::span<const DraftTarget> targets) {
  queries_.clear();
  size_t n_total = 0;
  std::vector<std::vector<int32_t>> out(targets.size());
  std::vector<size_t> queried;  // targets with a query, in order
  for (size_t i = 0; i < targets.size(); ++i) {
    const DraftTarget& t = targets[i];
    const Sequence& seq = *t.seq;
    DI_CHECK(seq.n_uncomputed() == 1 && t.n_drafts >= 1);
    if (seq.n_computed() == 0) continue;  // a one-token prompt: no computed position to draft from
    queried.push_back(i);
    DraftQuery q{seq.n_computed(), seq.tokens()[size_t(seq.n_computed())], t.n_drafts, {}};
    for (size_t k = 0; k < seq.block_tables().size(); ++k) q.block_tables[k] = seq.block_tables()[k].data();
    queries_.push_back(q);
    n_total += size_t(t.n_drafts);
  }
  drafts_.resize(n_total);
  if (!queries_.empty()) model_.draft(queries_, cache_.view(), drafts_.data());
  size_t at = 0;
  for (size_t j = 0; j < queries_.size(); ++j) {
    const size_t n = size_t(queries_[j].n_drafts);
    out[queried[j]].assign(drafts_.begin() + ptrdiff_t(at), drafts_.begin() + ptrdiff_t(at + n));
    at += n;
  }
  return out;
}

}  // namespace deepinfer
