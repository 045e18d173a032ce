// Expert placement load balancing (EPLB), DeepSeek's published policy written anew: from the
// tokens each routed expert of a layer received over a window, a placement with redundant
// copies of the busy experts that evens out the load per rank.
//
// Hierarchical, group-aware (when the expert groups divide over the nodes): (1) the groups are
// packed onto nodes, groups_per_node each, heaviest first into the lightest node, so a group's
// experts stay on one node; (2) within a node the node's slots go to its experts, one each, then
// every extra slot to the expert with the highest load per copy; (3) the copies (each carrying
// its expert's load / copies) are packed onto the node's ranks, slots_per_rank each, heaviest
// first into the lightest rank. Otherwise the same with one group and one node (the global
// policy). Ties go to the lower index, so every rank computes the same placement.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"

namespace deepinfer {

// Expert placement load balancing while serving (ModelOptions::eplb, expert parallelism only).
struct EplbOptions {
  int redundant_experts = 0;  // slots beyond one per expert (n_experts + this: a multiple of the ranks)
  int interval = 0;           // forwards between rebalances; 0: the placement never changes
  int window = 0;             // forwards whose loads a rebalance weighs (rounded up to whole intervals)
  int n_nodes = 1;            // machines the ranks run on, ranks [i * N / n_nodes, ...) on machine i
};

struct EplbPlacement {
  std::vector<int32_t> slot_expert;  // [n_slots]: rank r holds slots [r * n_slots / n_ranks, (r + 1) * ...)
  std::vector<int32_t> slot_rank;    // [n_slots]
};

// loads: [n_experts] tokens per expert (>= 0). Errors name what does not divide: n_slots must be
// a multiple of n_ranks and at least n_experts, n_ranks a multiple of n_nodes, n_experts of
// n_groups.
Result<EplbPlacement> eplb_placement(std::span<const int64_t> loads, int n_slots, int n_ranks, int n_groups,
                                     int n_nodes);

// Items (weights) into n_packs packs of exactly n / n_packs items each, heaviest item first into
// the lightest pack with room (ties to the lower index). Returns each item's pack.
std::vector<int32_t> balanced_packing(std::span<const double> weights, int n_packs);

}  // namespace deepinfer
