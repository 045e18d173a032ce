#include "model/expert_group.h"

#include <algorithm>
#include <string>

namespace deepinfer {

Result<ExpertPlacement> ExpertPlacement::contiguous(int n_experts, int n_ranks, int rank) {
  if (n_ranks < 1 || n_ranks > n_experts)
    return Status::Error("expert parallelism over " + std::to_string(n_ranks) + " ranks needs 1 to " +
                         std::to_string(n_experts) + " ranks (the model's routed experts)");
  std::vector<int32_t> slot_expert(static_cast<size_t>(n_experts)), slot_rank(static_cast<size_t>(n_experts));
  for (int e = 0; e < n_experts; ++e) {
    slot_expert[size_t(e)] = e;
    slot_rank[size_t(e)] = int32_t(int64_t(e) * n_ranks / n_experts);
  }
  return from_slots(n_experts, n_ranks, rank, std::move(slot_expert), std::move(slot_rank));
}

Result<ExpertPlacement> ExpertPlacement::from_slots(int n_experts, int n_ranks, int rank,
                                                    std::vector<int32_t> slot_expert,
                                                    std::vector<int32_t> slot_rank) {
  if (rank < 0 || rank >= n_ranks) return Status::Error("rank " + std::to_string(rank) + " is outside the group");
  if (slot_expert.size() != slot_rank.size()) return Status::Error("expert placement: slot lists differ in length");
  ExpertPlacement p;
  p.n_ranks = n_ranks;
  p.rank = rank;
  p.replicas.resize(size_t(std::max(0, n_experts)));
  for (size_t s = 0; s < slot_expert.size(); ++s) {
    if (slot_expert[s] < 0 || slot_expert[s] >= n_experts || slot_rank[s] < 0 || slot_rank[s] >= n_ranks)
      return Status::Error("expert placement: slot " + std::to_string(s) + " is out of range");
    p.replicas[size_t(slot_expert[s])].push_back(int32_t(s));
  }
  for (int e = 0; e < n_experts; ++e)
    if (p.replicas[size_t(e)].empty()) return Status::Error("expert placement: expert " + std::to_string(e) + " has no slot");
  p.slot_expert = std::move(slot_expert);
  p.slot_rank = std::move(slot_rank);
  return p;
}

bool ExpertPlacement::holds(int expert) const {
  for (const int32_t s : replicas[size_t(expert)])
    if (slot_rank[size_t(s)] == rank) return true;
  return false;
}

std::vector<int32_t> ExpertPlacement::held_experts() const {
  std::vector<int32_t> out;
  for (int e = 0; e < n_experts(); ++e)
    if (holds(e)) out.push_back(e);
  return out;
}

std::vector<int32_t> ExpertPlacement::local_slots() const {
  std::vector<int32_t> out;
  for (int s = 0; s < n_slots(); ++s)
    if (slot_rank[size_t(s)] == rank) out.push_back(s);
  return out;
}

}  // namespace deepinfer
