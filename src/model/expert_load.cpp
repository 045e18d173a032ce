#include "model/expert_load.h"

#include <algorithm>

namespace deepinfer {

void ExpertLoad::init(int n_ranks, int rank, std::vector<int32_t> moe_layers, int n_experts) {
  std::lock_guard lock(mu_);
  s_ = Snapshot{};
  s_.n_ranks = n_ranks;
  s_.rank = rank;
  const size_t n = moe_layers.size();
  s_.moe_layers = std::move(moe_layers);
  s_.routed.assign(n, std::vector<int64_t>(size_t(n_experts), 0));
  s_.window.assign(n, std::vector<int64_t>(size_t(n_experts), 0));
  s_.copies.assign(n, std::vector<int32_t>(size_t(n_experts), 0));
  s_.slot_expert.assign(n, {});
  s_.slot_rank.assign(n, {});
  s_.computed_per_period = {0};
}

void ExpertLoad::add_routed(int i, std::span<const int32_t> expert_ids) {
  std::lock_guard lock(mu_);
  for (const int32_t e : expert_ids) ++s_.routed[size_t(i)][size_t(e)];
}

void ExpertLoad::add_computed(int64_t rows) {
  std::lock_guard lock(mu_);
  s_.computed_per_period.back() += rows;
}

void ExpertLoad::set_window(int i, std::span<const int64_t> tokens) {
  std::lock_guard lock(mu_);
  s_.window[size_t(i)].assign(tokens.begin(), tokens.end());
}

void ExpertLoad::set_placement(int i, std::span<const int32_t> slot_expert, std::span<const int32_t> slot_rank) {
  std::lock_guard lock(mu_);
  std::fill(s_.copies[size_t(i)].begin(), s_.copies[size_t(i)].end(), 0);
  for (const int32_t e : slot_expert) ++s_.copies[size_t(i)][size_t(e)];
  s_.slot_expert[size_t(i)].assign(slot_expert.begin(), slot_expert.end());
  s_.slot_rank[size_t(i)].assign(slot_rank.begin(), slot_rank.end());
}

void ExpertLoad::count_rebalance() {
  std::lock_guard lock(mu_);
  ++s_.n_rebalances;
  s_.computed_per_period.push_back(0);
}

ExpertLoad::Snapshot ExpertLoad::snapshot() const {
  std::lock_guard lock(mu_);
  return s_;
}

}  // namespace deepinfer
