// EpRuntime: a process's part in expert parallelism, for the commands that run an engine:
// `mpirun -np N deepinfer <command> --expert-parallel N ...`. It starts MPI
// (MPI_THREAD_SERIALIZED: the main thread, then the engine thread, then the main thread again),
// checks that the world has exactly N ranks, and holds the group (MpiGroup) that the model
// (ModelOptions::expert_group) and the engine (Engine::create's StepGroup) share.
//
// Without mpirun and with N = 1 nothing of MPI is touched: start() returns null and the process
// runs alone, as it always did.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "dist/ep/mpi_group.h"
#include "model/expert_load.h"

namespace deepinfer {

class EpRuntime {
 public:
  // Null for a process of its own (N = 1, not started by mpirun or by `mpirun -np 1`). An error
  // when N does not match the number of processes mpirun started (or N > 1 without mpirun), or N
  // is not positive; the message names --expert-parallel.
  static Result<std::unique_ptr<EpRuntime>> start(int expert_parallel, double timeout_seconds);
  // Finalizes MPI, unless the group failed (a dead rank's collectives never complete: the
  // process then exits without it, and mpirun reports that).
  ~EpRuntime();
  EpRuntime(const EpRuntime&) = delete;
  EpRuntime& operator=(const EpRuntime&) = delete;

  MpiGroup& group() { return *group_; }
  // Where the model publishes this rank's expert loads (ModelOptions::expert_load).
  ExpertLoad& load() { return load_; }
  int rank() const { return group_->rank(); }
  int size() const { return group_->size(); }
  // One line for the log: this rank, its resident memory (VmRSS and peak VmHWM), what its
  // exchanges cost (ExchangeStats) and the rows its experts computed per period between EPLB
  // rebalances.
  std::string summary() const;

 private:
  EpRuntime() = default;
  std::unique_ptr<MpiGroup> group_;
  ExpertLoad load_;
};

}  // namespace deepinfer
