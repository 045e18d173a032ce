// Expert parallelism, the model's side: which rank holds which routed experts
// (ExpertPlacement), and the group of ranks a model's MoE layers exchange tokens over
// (ExpertGroup; over MPI in dist/ep/, in-process fakes in tests).
//
// Every rank of a group runs the same model with the same config; each binds only the routed
// experts its placement gives it. Each MoE layer of every forward makes the same sequence of
// exchanges on every rank (an idle rank with 0 rows too), so the collectives line up.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"

namespace deepinfer {

struct ExpertPlacement {
  int n_ranks = 1;
  int rank = 0;                // this process's rank in [0, n_ranks)
  std::vector<int32_t> owner;  // [n_routed_experts]: the rank holding each routed expert

  // Contiguous slices: expert e on rank e * n_ranks / n_experts (rank r holds
  // [ceil(r * E / N), ceil((r + 1) * E / N))). An error unless 1 <= n_ranks <= n_experts.
  static Result<ExpertPlacement> contiguous(int n_experts, int n_ranks, int rank);

  int n_experts() const { return int(owner.size()); }
  bool holds(int expert) const { return owner[size_t(expert)] == rank; }
  // The experts this rank holds, ascending; an expert's local index is its position here.
  std::vector<int32_t> local_experts() const;
};

// A group of ranks that exchange byte blocks all-to-all. Every rank must make the same
// sequence of calls. A failed call (a rank that stops answering within the group's deadline,
// or dies) fails the group for good: every later call fails at once, without communicating.
// Not thread-safe: one thread (the engine's) makes every call.
class ExpertGroup {
 public:
  virtual ~ExpertGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // send[r] goes to rank r, which receives it as recv[this rank]. Both [size()].
  virtual Status exchange_counts(std::span<const int64_t> send, std::span<int64_t> recv) = 0;
  // Block r of `send` (send_bytes[r] bytes; the blocks back to back in rank order) goes to rank
  // r; block r of `recv` (recv_bytes[r] bytes, likewise) comes from rank r. recv_bytes[r] must
  // equal what rank r sends here (agreed by exchange_counts first). Both byte lists [size()].
  virtual Status exchange(std::span<const uint8_t> send, std::span<const int64_t> send_bytes, std::span<uint8_t> recv,
                          std::span<const int64_t> recv_bytes) = 0;

  // Ok while every call so far succeeded; else why the group failed (for good).
  virtual Status health() const = 0;
  // Fails the group for good (e.g. a peer sent malformed data); the first reason is kept.
  virtual void fail(Status why) = 0;
};

}  // namespace deepinfer
