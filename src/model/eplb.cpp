#include "model/eplb.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "core/check.h"

namespace deepinfer {

std::vector<int32_t> balanced_packing(std::span<const double> weights, int n_packs) {
  const size_t n = weights.size();
  DI_CHECK(n_packs > 0 && n % size_t(n_packs) == 0);
  const size_t capacity = n / size_t(n_packs);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return weights[a] > weights[b]; });
  std::vector<double> load(size_t(n_packs), 0.0);
  std::vector<size_t> count(size_t(n_packs), 0);
  std::vector<int32_t> pack(n, -1);
  for (const size_t i : order) {
    int best = -1;
    for (int p = 0; p < n_packs; ++p)
      if (count[size_t(p)] < capacity && (best < 0 || load[size_t(p)] < load[size_t(best)])) best = p;
    pack[i] = best;
    load[size_t(best)] += weights[i];
    ++count[size_t(best)];
  }
  return pack;
}

Result<EplbPlacement> eplb_placement(std::span<const int64_t> loads, int n_slots, int n_ranks, int n_groups,
                                     int n_nodes) {
  const int n_experts = int(loads.size());
  if (n_ranks < 1 || n_slots % n_ranks != 0 || n_slots < n_experts)
    return Status::Error("EPLB: " + std::to_string(n_slots) + " expert slots must be at least the " +
                         std::to_string(n_experts) + " experts and a multiple of the " + std::to_string(n_ranks) +
                         " ranks");
  if (n_nodes < 1 || n_ranks % n_nodes != 0)
    return Status::Error("EPLB: " + std::to_string(n_ranks) + " ranks do not divide over " + std::to_string(n_nodes) +
                         " nodes");
  if (n_groups < 1 || n_experts % n_groups != 0)
    return Status::Error("EPLB: " + std::to_string(n_experts) + " experts do not divide into " +
                         std::to_string(n_groups) + " groups");
  if (n_groups % n_nodes != 0) n_groups = n_nodes = 1;  // the global policy

  // (1) Groups onto nodes.
  const int group_size = n_experts / n_groups;
  std::vector<double> group_load(size_t(n_groups), 0.0);
  for (int e = 0; e < n_experts; ++e) group_load[size_t(e / group_size)] += double(loads[size_t(e)]);
  const std::vector<int32_t> group_node = balanced_packing(group_load, n_nodes);

  const int slots_per_node = n_slots / n_nodes, ranks_per_node = n_ranks / n_nodes;
  const int slots_per_rank = n_slots / n_ranks;
  EplbPlacement out;
  out.slot_expert.assign(size_t(n_slots), -1);
  out.slot_rank.assign(size_t(n_slots), -1);
  for (int node = 0; node < n_nodes; ++node) {
    std::vector<int32_t> experts;  // of this node, ascending
    for (int e = 0; e < n_experts; ++e)
      if (group_node[size_t(e / group_size)] == node) experts.push_back(e);
    // (2) Copies: one each, then each extra slot to the highest load per copy.
    std::vector<int> copies(experts.size(), 1);
    for (int extra = slots_per_node - int(experts.size()); extra > 0; --extra) {
      size_t best = 0;
      for (size_t i = 1; i < experts.size(); ++i)
        if (double(loads[size_t(experts[i])]) / copies[i] > double(loads[size_t(experts[best])]) / copies[best])
          best = i;
      ++copies[best];
    }
    // (3) Copies onto the node's ranks.
    std::vector<int32_t> copy_expert;
    std::vector<double> copy_load;
    for (size_t i = 0; i < experts.size(); ++i)
      for (int c = 0; c < copies[i]; ++c) {
        copy_expert.push_back(experts[i]);
        copy_load.push_back(double(loads[size_t(experts[i])]) / copies[i]);
      }
    const std::vector<int32_t> copy_rank = balanced_packing(copy_load, ranks_per_node);
    for (int r = 0; r < ranks_per_node; ++r) {
      std::vector<int32_t> held;
      for (size_t c = 0; c < copy_expert.size(); ++c)
        if (copy_rank[c] == r) held.push_back(copy_expert[c]);
      std::sort(held.begin(), held.end());
      const int rank = node * ranks_per_node + r;
      DI_CHECK(int(held.size()) == slots_per_rank);
      for (int s = 0; s < slots_per_rank; ++s) {
        out.slot_expert[size_t(rank * slots_per_rank + s)] = held[size_t(s)];
        out.slot_rank[size_t(rank * slots_per_rank + s)] = rank;
      }
    }
  }
  return out;
}

}  // namespace deepinfer
