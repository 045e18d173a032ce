// StepGroup: the engines of an expert-parallel group step in lockstep. Each rank runs its own
// Engine (scheduler, KV cache, requests: data-parallel attention), but every forward runs
// collective exchanges in its MoE layers (model/expert_group.h), so all ranks must run the
// same number of forwards. Before each step the engine thread asks the group whether any rank
// has work; if one has, every rank steps, one without work through an empty forward (0 rows).
// The group ends when every rank is stopping and none has work.
//
// Collectives are bounded by the group's deadline: a rank that stops answering or dies fails the
// group for good (health()); the engines then finish their requests with kError and step alone
// no more. Implemented over MPI in dist/ep/; in-process fakes in tests.
#pragma once

#include "core/status.h"

namespace deepinfer {

class StepGroup {
 public:
  struct Agreement {
    bool any_work = false;      // some rank has work: every rank steps
    bool all_stopping = false;  // every rank is stopping (and, when !any_work, the group is done)
  };

  virtual ~StepGroup() = default;
  // Collective: every rank's engine thread calls it before each step. An error: the group failed.
  virtual Result<Agreement> agree(bool has_work, bool stopping) = 0;
  // Ok while every collective so far (the forwards' exchanges included) succeeded; else why not.
  virtual Status health() const = 0;
};

}  // namespace deepinfer
