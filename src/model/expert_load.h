// ExpertLoad: what this rank's expert-parallel MoE layers did, for metrics and logs: tokens its
// rows routed to each expert (cumulative, and the group's total over the last EPLB window), rows
// its slots computed (per period between rebalances), and each expert's copies. Written by the
// engine thread (ExpertParallelMoe), read from any thread (snapshot()).
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

namespace deepinfer {

class ExpertLoad {
 public:
  struct Snapshot {
    int n_ranks = 0, rank = 0;
    std::vector<int32_t> moe_layers;                    // model layer index of each MoE layer below
    std::vector<std::vector<int64_t>> routed;           // [moe layer][expert]: tokens this rank's rows sent, cumulative
    std::vector<std::vector<int64_t>> window;           // [moe layer][expert]: the group's tokens in the last window
    std::vector<std::vector<int32_t>> copies;           // [moe layer][expert]: slots holding the expert
    std::vector<std::vector<int32_t>> slot_expert;      // [moe layer][slot]: the placement (ExpertPlacement)
    std::vector<std::vector<int32_t>> slot_rank;        // [moe layer][slot]
    std::vector<int64_t> computed_per_period;           // rows this rank's slots computed, per period between rebalances
    int64_t n_rebalances = 0;
  };

  void init(int n_ranks, int rank, std::vector<int32_t> moe_layers, int n_experts);
  // i: index into moe_layers.
  void add_routed(int i, std::span<const int32_t> expert_ids);
  void add_computed(int64_t rows);
  void set_window(int i, std::span<const int64_t> tokens);
  void set_placement(int i, std::span<const int32_t> slot_expert, std::span<const int32_t> slot_rank);
  // Starts a new period of computed rows.
  void count_rebalance();
  Snapshot snapshot() const;

 private:
  mutable std::mutex mu_;
  Snapshot s_;
};

}  // namespace deepinfer
