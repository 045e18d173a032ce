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

// Where the routed experts of one MoE layer live: physical slots, each holding one expert on
// one rank. Every expert has at least one slot; more than one (redundant copies, from EPLB:
// model/eplb.h) share its rows. Any copy computes a row bitwise alike, so the placement never
// changes outputs.
struct ExpertPlacement {
  int n_ranks = 1;
  int rank = 0;                            // this process's rank in [0, n_ranks)
  std::vector<int32_t> slot_expert;        // [n_slots]: the expert each slot holds
  std::vector<int32_t> slot_rank;          // [n_slots]: the rank holding each slot
  std::vector<std::vector<int32_t>> replicas;  // [n_experts]: an expert's slots, ascending

  // One slot per expert, in contiguous slices: expert e on rank e * n_ranks / n_experts. An
  // error unless 1 <= n_ranks <= n_experts.
  static Result<ExpertPlacement> contiguous(int n_experts, int n_ranks, int rank);
  // Checks (every expert in a slot, every id and rank in range) and derives `replicas`.
  static Result<ExpertPlacement> from_slots(int n_experts, int n_ranks, int rank, std::vector<int32_t> slot_expert,
                                            std::vector<int32_t> slot_rank);

  int n_experts() const { return int(replicas.size()); }
  int n_slots() const { return int(slot_expert.size()); }
  // Whether a slot of `expert` is on this rank.
  bool holds(int expert) const;
  // The experts with a slot here, ascending, once each.
  std::vector<int32_t> held_experts() const;
  // The slots on this rank, ascending; a slot's local index is its position here.
  std::vector<int32_t> local_slots() const;
  // The slot that computes the k-th assignment of `expert` in one dispatch from this rank: the
  // copies take turns, starting at an offset given by the rank.
  int32_t slot_for(int expert, int64_t k) const {
    const std::vector<int32_t>& r = replicas[size_t(expert)];
    return r[size_t((k + rank) % int64_t(r.size()))];
  }
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
  Status exchange(std::span<const uint8_t> send, std::span<const int64_t> send_bytes, std::span<uint8_t> recv,
                  std::span<const int64_t> recv_bytes) {
    DI_RETURN_IF_ERROR(exchange_start(send, send_bytes, recv, recv_bytes));
    return exchange_finish();
  }
  // exchange() in two halves, so that other work runs while the bytes travel: start returns at
  // once (send, recv and both byte lists must stay untouched until finish), finish waits for it.
  // One exchange at a time.
  virtual Status exchange_start(std::span<const uint8_t> send, std::span<const int64_t> send_bytes,
                                std::span<uint8_t> recv, std::span<const int64_t> recv_bytes) = 0;
  virtual Status exchange_finish() = 0;

  // Ok while every call so far succeeded; else why the group failed (for good).
  virtual Status health() const = 0;
  // Fails the group for good (e.g. a peer sent malformed data); the first reason is kept.
  virtual void fail(Status why) = 0;
};

}  // namespace deepinfer
