#include "model/expert_parallel_moe.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "model/scratch.h"

namespace deepinfer {

ExpertParallelMoe::ExpertParallelMoe(ExpertGroup& group, std::vector<int32_t> moe_layers, const ExpertPlacement& initial,
                                     const EplbOptions& eplb, int n_expert_groups, ExpertLoad* load, Backend& backend,
                                     DType wire)
    : group_(group),
      moe_layers_(std::move(moe_layers)),
      placements_(moe_layers_.size(), initial),
      eplb_(eplb),
      n_expert_groups_(n_expert_groups),
      load_(load),
      backend_(backend),
      wire_(wire) {
  DI_CHECK(wire_ == DType::F32 || wire_ == DType::BF16);
  DI_CHECK(initial.n_ranks == group_.size() && initial.rank == group_.rank());
  counts_.assign(moe_layers_.size(), std::vector<int64_t>(size_t(initial.n_experts()), 0));
  if (load_) {
    load_->init(initial.n_ranks, initial.rank, moe_layers_, initial.n_experts());
    for (size_t i = 0; i < moe_layers_.size(); ++i) load_->set_placement(int(i), initial.slot_expert, initial.slot_rank);
  }
}

int ExpertParallelMoe::index_of(int layer) const {
  const auto it = std::find(moe_layers_.begin(), moe_layers_.end(), layer);
  DI_CHECK(it != moe_layers_.end());
  return int(it - moe_layers_.begin());
}

void ExpertParallelMoe::begin_forward(const Rebind& rebind) {
  if (eplb_.interval <= 0 || !group_.health().ok()) return;
  if (++n_forwards_ % eplb_.interval != 0) return;
  if (Status s = rebalance(rebind); !s.ok()) group_.fail(s);
}

Status ExpertParallelMoe::rebalance(const Rebind& rebind) {
  // This rank's tokens per expert over the window, then the group's (every rank sends its own to
  // every rank and adds up the same numbers).
  periods_.push_back(counts_);
  for (auto& c : counts_) std::fill(c.begin(), c.end(), 0);
  const size_t n_periods = size_t(std::max(1, (eplb_.window + eplb_.interval - 1) / eplb_.interval));
  while (periods_.size() > n_periods) periods_.pop_front();
  const size_t n_layers = moe_layers_.size(), n_experts = size_t(placements_[0].n_experts());
  std::vector<int64_t> mine(n_layers * n_experts, 0);
  for (const auto& period : periods_)
    for (size_t i = 0; i < n_layers; ++i)
      for (size_t e = 0; e < n_experts; ++e) mine[i * n_experts + e] += period[i][e];
  const int n_ranks = group_.size();
  const int64_t bytes = int64_t(mine.size() * sizeof(int64_t));
  std::vector<uint8_t> send(size_t(bytes * n_ranks)), recv(size_t(bytes * n_ranks));
  for (int r = 0; r < n_ranks; ++r) std::memcpy(send.data() + r * bytes, mine.data(), size_t(bytes));
  const std::vector<int64_t> block(size_t(n_ranks), bytes);
  DI_RETURN_IF_ERROR(group_.exchange(send, block, recv, block));
  std::vector<int64_t> total(mine.size(), 0);
  for (int r = 0; r < n_ranks; ++r) {
    const int64_t* theirs = reinterpret_cast<const int64_t*>(recv.data() + r * bytes);
    for (size_t k = 0; k < total.size(); ++k) total[k] += theirs[k];
  }

  for (size_t i = 0; i < n_layers; ++i) {
    const std::span<const int64_t> loads(total.data() + i * n_experts, n_experts);
    if (load_) load_->set_window(int(i), loads);
    if (std::all_of(loads.begin(), loads.end(), [](int64_t v) { return v == 0; })) continue;  // nothing to weigh
    const ExpertPlacement& old = placements_[i];
    DI_ASSIGN_OR_RETURN(EplbPlacement plan,
                        eplb_placement(loads, old.n_slots(), n_ranks, n_expert_groups_, eplb_.n_nodes));
    DI_ASSIGN_OR_RETURN(ExpertPlacement next, ExpertPlacement::from_slots(int(n_experts), n_ranks, old.rank,
                                                                          std::move(plan.slot_expert),
                                                                          std::move(plan.slot_rank)));
    if (next.slot_expert == old.slot_expert && next.slot_rank == old.slot_rank) continue;
    DI_RETURN_IF_ERROR(rebind(moe_layers_[i], next.held_experts()));
    if (load_) load_->set_placement(int(i), next.slot_expert, next.slot_rank);
    placements_[i] = std::move(next);
  }
  if (load_) load_->count_rebalance();
  return Status::Ok();
}

void ExpertParallelMoe::run(int layer, const float* x, int64_t ldx, int64_t m, int64_t hidden, int top_k,
                            const int32_t* ids, const float* weights, std::span<const MlpWeightRefs> experts,
                            const MlpWeightRefs* shared, float* y, int64_t ldy) {
  // Each row through its one expert with weight 1 (the kernel's 0 + out * 1 is out), the kernel
  // given only the experts the rows name.
  const RoutedExperts routed = [&](const float* rx, int64_t rld, int64_t n, const int32_t* expert_ids, float* out) {
    local_refs_.clear();
    local_of_.assign(experts.size(), -1);
    local_ids_.resize(size_t(n));
    for (int64_t r = 0; r < n; ++r) {
      int32_t& local = local_of_[size_t(expert_ids[r])];
      if (local < 0) {
        local = int32_t(local_refs_.size());
        local_refs_.push_back(experts[size_t(expert_ids[r])]);
      }
      local_ids_[size_t(r)] = local;
    }
    ones_.assign(size_t(n), 1.0f);
    backend_.moe({rx, rld, n, local_refs_.data(), int(local_refs_.size()), 1, local_ids_.data(), ones_.data(), nullptr,
                  out, hidden});
  };
  SharedExperts shared_fn;
  if (shared)  // as the kernel's shared group computes it: gate/up + SiLU, then down
    shared_fn = [&](const float* sx, int64_t sld, int64_t n, float* out) {
      const int64_t inter = shared->gate->n_out;
      float* act = sized(shared_act_, size_t(n * inter));
      backend_.swiglu({sx, sld, n, shared->gate, shared->up, act, inter});
      backend_.linear({act, inter, n, shared->down, out, hidden});
    };
  run(layer, x, ldx, m, hidden, top_k, ids, weights, int(experts.size()), routed, shared_fn, y, ldy);
}

void ExpertParallelMoe::run(int layer, const float* x, int64_t ldx, int64_t m, int64_t hidden, int top_k,
                            const int32_t* ids, const float* weights, int n_experts, const RoutedExperts& routed,
                            const SharedExperts& shared, float* y, int64_t ldy) {
  const int i = index_of(layer);
  const ExpertPlacement& placement = placements_[size_t(i)];
  DI_CHECK(n_experts == placement.n_experts() && top_k > 0);
  const size_t n_assign = size_t(m * top_k);
  for (size_t a = 0; a < n_assign; ++a) ++counts_[size_t(i)][size_t(ids[a])];
  if (load_) load_->add_routed(i, {ids, n_assign});
  // The shared experts run while the dispatched rows travel.
  Status s = start_dispatch(placement, x, ldx, m, hidden, top_k, ids);
  const float* shared_out = nullptr;
  if (shared && m > 0) {
    float* out = sized(shared_out_, size_t(m * hidden));
    shared(x, ldx, m, out);
    shared_out = out;
  }
  if (s.ok()) s = finish_dispatch_and_compute(placement, hidden, routed, int64_t(n_assign));
  if (!s.ok()) {
    group_.fail(s);
    for (int64_t r = 0; r < m; ++r) std::fill_n(y + r * ldy, hidden, 0.0f);
    return;
  }
  const float* outputs = reinterpret_cast<const float*>(back_recv_.data());
  if (wire_ != DType::F32) {
    rows_from_wire(back_recv_.data(), int64_t(n_assign), hidden, wire_, sized(back_f32_, n_assign * size_t(hidden)), hidden);
    outputs = back_f32_.data();
  }
  combine_expert_outputs(plan_, {ids, n_assign}, {weights, n_assign}, top_k, outputs, shared_out, hidden, y, ldy);
}

Status ExpertParallelMoe::start_dispatch(const ExpertPlacement& placement, const float* x, int64_t ldx, int64_t m,
                                         int64_t hidden, int top_k, const int32_t* ids) {
  DI_RETURN_IF_ERROR(group_.health());
  const int n_ranks = placement.n_ranks;
  const size_t n_assign = size_t(m * top_k);
  const int64_t rec = dispatch_record_bytes(hidden, wire_);

  // Dispatch: counts, then the records.
  plan_ = DispatchPlan::make({ids, n_assign}, placement);
  send_.resize(n_assign * size_t(rec));
  pack_dispatch(plan_, x, ldx, hidden, {ids, n_assign}, top_k, send_, wire_);
  n_recv_.assign(size_t(n_ranks), 0);
  DI_RETURN_IF_ERROR(group_.exchange_counts(plan_.n_send, n_recv_));
  DI_RETURN_IF_ERROR(check_announced_counts(n_recv_, rec));
  send_bytes_.resize(size_t(n_ranks));
  recv_bytes_.resize(size_t(n_ranks));
  int64_t n_received = 0;
  for (int r = 0; r < n_ranks; ++r) {
    send_bytes_[size_t(r)] = plan_.n_send[size_t(r)] * rec;
    recv_bytes_[size_t(r)] = n_recv_[size_t(r)] * rec;
    n_received += n_recv_[size_t(r)];
  }
  recv_.resize(size_t(n_received * rec));
  return group_.exchange_start(send_, send_bytes_, recv_, recv_bytes_);
}

Status ExpertParallelMoe::finish_dispatch_and_compute(const ExpertPlacement& placement, int64_t hidden,
                                                      const RoutedExperts& routed, int64_t n_assign) {
  DI_RETURN_IF_ERROR(group_.exchange_finish());
  const int n_ranks = placement.n_ranks;
  const int64_t rec = dispatch_record_bytes(hidden, wire_), back = return_record_bytes(hidden, wire_);
  const int64_t n_received = int64_t(recv_.size()) / rec;

  // This rank's slots on every received row.
  const std::vector<int32_t> local_slots = placement.local_slots();
  local_index_.assign(size_t(placement.n_slots()), -1);
  for (size_t k = 0; k < local_slots.size(); ++k) local_index_[size_t(local_slots[k])] = int32_t(k);
  DI_ASSIGN_OR_RETURN(ReceivedRecords in, parse_dispatch(recv_, hidden, local_index_, wire_));
  back_send_.resize(size_t(n_received * back));
  if (in.n > 0) {
    record_experts_.resize(size_t(in.n));
    for (int64_t r = 0; r < in.n; ++r)
      record_experts_[size_t(r)] = placement.slot_expert[size_t(local_slots[size_t(in.local_ids[size_t(r)])])];
    float* out = wire_ == DType::F32 ? reinterpret_cast<float*>(back_send_.data())
                                     : sized(expert_out_, size_t(in.n * hidden));
    routed(in.x, in.ldx, in.n, record_experts_.data(), out);
    if (wire_ != DType::F32) rows_to_wire(out, hidden, in.n, hidden, wire_, back_send_.data());
  }
  if (load_) load_->add_computed(in.n);

  // Combine's inputs come back in the order they were sent.
  for (int r = 0; r < n_ranks; ++r) {
    std::swap(send_bytes_[size_t(r)], recv_bytes_[size_t(r)]);
    send_bytes_[size_t(r)] = send_bytes_[size_t(r)] / rec * back;
    recv_bytes_[size_t(r)] = recv_bytes_[size_t(r)] / rec * back;
  }
  back_recv_.resize(size_t(n_assign * back));
  return group_.exchange(back_send_, send_bytes_, back_recv_, recv_bytes_);
}

}  // namespace deepinfer
