#include "model/expert_group.h"

#include <string>

namespace deepinfer {

Result<ExpertPlacement> ExpertPlacement::contiguous(int n_experts, int n_ranks, int rank) {
  if (n_ranks < 1 || n_ranks > n_experts)
    return Status::Error("expert parallelism over " + std::to_string(n_ranks) + " ranks needs 1 to " +
                         std::to_string(n_experts) + " ranks (the model's routed experts)");
  if (rank < 0 || rank >= n_ranks) return Status::Error("rank " + std::to_string(rank) + " is outside the group");
  ExpertPlacement p;
  p.n_ranks = n_ranks;
  p.rank = rank;
  p.owner.resize(size_t(n_experts));
  for (int e = 0; e < n_experts; ++e) p.owner[size_t(e)] = int32_t(int64_t(e) * n_ranks / n_experts);
  return p;
}

std::vector<int32_t> ExpertPlacement::local_experts() const {
  std::vector<int32_t> out;
  for (int e = 0; e < n_experts(); ++e)
    if (holds(e)) out.push_back(e);
  return out;
}

}  // namespace deepinfer
