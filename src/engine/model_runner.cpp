#include "engine/model_runner.h"

#include "core/check.h"

namespace deepinfer {

ModelRunner::ModelRunner(CausalLM& model, KvCache& cache) : model_(model), cache_(cache) {}

std::span<const float> ModelRunner::execute(const SchedulerOutput& out) {
  cache_.copy_blocks(out.block_copies);
  batch_.token_ids.clear();
  batch_.positions.clear();
  batch_.seqs.clear();
  batch_.logit_rows.clear();
  batch_.prompt_rows.clear();
  for (const ScheduledChunk& c : out.chunks) {
    const Sequence& seq = *c.seq;
    const int32_t row_begin = int32_t(batch_.token_ids.size());
    const int begin = seq.n_computed(), end = begin + c.n_new;
    for (int p = begin; p < end; ++p) {
      batch_.token_ids.push_back(seq.tokens()[size_t(p)]);
      batch_.positions.push_back(p);
      batch_.prompt_rows.push_back(p < seq.n_prompt() ? 1 : 0);
    }
    BatchSequence bs{row_begin, c.n_new, end, {}};
    for (size_t k = 0; k < seq.block_tables().size(); ++k) bs.block_tables[k] = seq.block_tables()[k].data();
    batch_.seqs.push_back(bs);
    if (c.sample) {
      DI_CHECK(c.n_logit_rows >= 1 && c.n_logit_rows <= c.n_new);
      for (int i = c.n_new - c.n_logit_rows; i < c.n_new; ++i) batch_.logit_rows.push_back(row_begin + i);
    }
  }
  const size_t vocab = size_t(model_.info().vocab_size);
  logits_.resize(batch_.logit_rows.size() * vocab);
  model_.forward(batch_, cache_.view(), logits_.data());
  return logits_;
}

}  // namespace deepinfer
