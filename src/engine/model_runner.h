// ModelRunner: executes one scheduled step on the model. It performs the step's block copies,
// assembles the ForwardBatch (each chunk's token ids, positions and provenance (prompt where the
// position is below the sequence's prompt length), its block table, and a logit row for every
// chunk that ends at its sequence's last token), and runs one forward over all
// chunks together. Engine thread only.
#pragma once

#include <span>
#include <vector>

#include "engine/kv_cache.h"
#include "engine/scheduler.h"
#include "model/causal_lm.h"

namespace deepinfer {

class ModelRunner {
 public:
  ModelRunner(CausalLM& model, KvCache& cache);

  // Runs `out` (before Scheduler::update: n_computed is still the pre-step count). Returns the
  // logits [n sampling chunks, vocab_size], in chunk order, valid until the next call.
  std::span<const float> execute(const SchedulerOutput& out);

 private:
  CausalLM& model_;
  KvCache& cache_;
  ForwardBatch batch_;
  std::vector<float> logits_;
};

}  // namespace deepinfer
