// MpiGroup: the ranks of MPI_COMM_WORLD (a duplicate of it) as one expert-parallel group: the
// MoE layers' all-to-all exchanges (ExpertGroup, model/expert_group.h) and the engines'
// per-step agreement (StepGroup, engine/step_group.h).
//
// Every collective is non-blocking (MPI_Ialltoall, MPI_Ialltoallv, MPI_Iallreduce, ...) and
// polled with MPI_Test until a deadline (`timeout_seconds`): a rank that stops answering, or a
// collective that MPI reports failed (errors return, they do not abort), fails the group for
// good, and every later call fails at once without touching MPI (an abandoned collective is
// never completed). Not thread-safe: the engine thread makes every call while an engine runs;
// the main thread before and after (MPI initialized with MPI_THREAD_SERIALIZED or more).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "engine/step_group.h"
#include "model/expert_group.h"

namespace deepinfer {

// What the exchanges cost on this rank, since start (for benchmarks).
struct ExchangeStats {
  uint64_t n_exchanges = 0;       // ExpertGroup::exchange calls (2 per MoE layer and forward)
  uint64_t n_counts = 0;          // exchange_counts calls (1 per MoE layer and forward)
  uint64_t n_agreements = 0;      // StepGroup::agree calls
  uint64_t bytes_sent = 0;        // payload sent to other ranks (not to itself)
  uint64_t bytes_to_self = 0;     // payload that stayed on this rank
  double seconds_exchanging = 0;  // wall time inside the exchange calls (waiting included, overlapped work not)
};

class MpiGroup final : public ExpertGroup, public StepGroup {
 public:
  // Precondition: MPI is initialized. Duplicates MPI_COMM_WORLD.
  explicit MpiGroup(double timeout_seconds);
  ~MpiGroup() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status exchange_counts(std::span<const int64_t> send, std::span<int64_t> recv) override;
  Status exchange_start(std::span<const uint8_t> send, std::span<const int64_t> send_bytes, std::span<uint8_t> recv,
                        std::span<const int64_t> recv_bytes) override;
  Status exchange_finish() override;
  Result<Agreement> agree(bool has_work, bool stopping) override;
  Status health() const override;
  void fail(Status why) override;

  // Collective: rank 0 gets every rank's string (in rank order); the others get an empty list.
  Result<std::vector<std::string>> gather_to_root(const std::string& mine);
  ExchangeStats stats() const {  // from any thread
    std::lock_guard lock(mu_);
    return stats_;
  }
  double timeout_seconds() const { return timeout_seconds_; }

 private:
  // Polls `request` until it completes, MPI reports an error, or the deadline passes.
  Status wait(MPI_Request& request, const char* what);
  Status check(int rc, const char* what);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  double timeout_seconds_;
  ExchangeStats stats_;  // guarded by mu_
  std::vector<int> send_counts_, send_displs_, recv_counts_, recv_displs_;
  MPI_Request pending_ = MPI_REQUEST_NULL;  // the started exchange
  double pending_seconds_ = 0;             // time spent starting it
  mutable std::mutex mu_;  // guards failure_ and stats_ (read from other threads: /health, /metrics)
  Status failure_;
};

}  // namespace deepinfer
