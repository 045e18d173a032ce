// The bookkeeping of one expert-parallel MoE layer, without communication: which (row, expert)
// assignments go to which rank, how they travel, and how the home rank sums what comes back.
//
//   home: DispatchPlan::make(ids)  -> pack_dispatch() -> [exchange] ->
//   owner: parse_dispatch()        -> experts run on the records' rows -> [exchange back] ->
//   home: combine_expert_outputs() -> y
//
// Wire record of one assignment (dispatch): int32 slot id (ExpertPlacement), int32 zero, then the token's
// activation row as `hidden` values of the wire dtype: f32 (as the single-process kernel reads
// it, so results are bitwise the same), or bf16 (rounded to nearest even: half the bytes, not
// bitwise). Return: one row of `hidden` values of the wire dtype per received record, in the
// order received (the expert's output before the routing weight).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "model/expert_group.h"

namespace deepinfer {

// wire: F32 or BF16.
inline int64_t dispatch_record_bytes(int64_t hidden, DType wire = DType::F32) {
  return 8 + hidden * int64_t(dtype_size(wire));
}
inline int64_t return_record_bytes(int64_t hidden, DType wire = DType::F32) { return hidden * int64_t(dtype_size(wire)); }

// Rows of `hidden` values in the wire dtype to and from f32: src/dst [n, ld] f32, the wire rows
// back to back. F32 copies; BF16 rounds to nearest even (and widens exactly).
void rows_to_wire(const float* src, int64_t ld, int64_t n, int64_t hidden, DType wire, uint8_t* out);
void rows_from_wire(const uint8_t* in, int64_t n, int64_t hidden, DType wire, float* dst, int64_t ld);

// The home rank's side: assignments a = r * top_k + j of rows r < m, each to the slot
// ExpertPlacement::slot_for picks (an expert's assignments in order of a take turns over its
// copies), grouped by the slot's rank.
struct DispatchPlan {
  std::vector<int64_t> n_send;      // [n_ranks]: assignments sent to each rank
  std::vector<int32_t> send_order;  // [m * top_k]: assignment of each sent record, by rank, then a ascending
  std::vector<int64_t> position;    // [m * top_k]: position of assignment a in send_order
  std::vector<int32_t> slot;        // [m * top_k]: the slot computing assignment a

  // ids: [m, top_k] expert ids, each < placement.n_experts() (checked).
  static DispatchPlan make(std::span<const int32_t> ids, const ExpertPlacement& placement);
};

// Writes the plan's records, in send_order, to `out` ([m * top_k * dispatch_record_bytes]).
// x: [m, ldx], the first `hidden` columns used; ids: [m, top_k].
void pack_dispatch(const DispatchPlan& plan, const float* x, int64_t ldx, int64_t hidden, std::span<const int32_t> ids,
                   int top_k, std::span<uint8_t> out, DType wire = DType::F32);

// The owner's side: the records received from all ranks, back to back.
struct ReceivedRecords {
  int64_t n = 0;
  const float* x = nullptr;         // row i at x + i * ldx: inside the received bytes (f32 wire), or `widened`
  int64_t ldx = 0;
  std::vector<int32_t> local_ids;   // [n]: each record's slot as an index into local_slots()
  std::vector<float> widened;       // [n, hidden]: the rows as f32 (bf16 wire)
};

// Checks the record counts the other ranks announced (exchange_counts): each at least 0, and all
// together at most 2^40 bytes of records of `record_bytes`. An error names the rank.
Status check_announced_counts(std::span<const int64_t> n_records, int64_t record_bytes);

// Checks every record (whole records only, each naming a slot on this rank: an error names the
// first that does not) and indexes them. `bytes` must stay alive while x is read.
// `local_index`: [n_slots], a slot's index in placement.local_slots(), or -1.
Result<ReceivedRecords> parse_dispatch(std::span<const uint8_t> bytes, int64_t hidden,
                                       std::span<const int32_t> local_index, DType wire = DType::F32);

// y[r] = sum over the row's experts in increasing id of weight * output, then + shared[r]:
// exactly the single-process MoE kernel's order and operations (kernels/cpu/moe.cpp).
// outputs: [m * top_k, hidden] in send_order; weights: [m, top_k]; shared: [m, hidden] or null;
// y: [m, ldy].
void combine_expert_outputs(const DispatchPlan& plan, std::span<const int32_t> ids, std::span<const float> weights,
                            int top_k, const float* outputs, const float* shared, int64_t hidden, float* y,
                            int64_t ldy);

}  // namespace deepinfer
