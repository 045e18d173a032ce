#include "model/expert_parallel_moe.h"

#include <algorithm>

#include "core/check.h"
#include "model/scratch.h"

namespace deepinfer {

ExpertParallelMoe::ExpertParallelMoe(ExpertGroup& group, ExpertPlacement placement, Backend& backend)
    : group_(group), placement_(std::move(placement)), backend_(backend) {
  DI_CHECK(placement_.n_ranks == group_.size() && placement_.rank == group_.rank());
  local_experts_ = placement_.local_experts();
  local_index_.assign(size_t(placement_.n_experts()), -1);
  for (size_t i = 0; i < local_experts_.size(); ++i) local_index_[size_t(local_experts_[i])] = int32_t(i);
}

void ExpertParallelMoe::run(const float* x, int64_t ldx, int64_t m, int64_t hidden, int top_k, const int32_t* ids,
                            const float* weights, std::span<const MlpWeightRefs> experts, const MlpWeightRefs* shared,
                            float* y, int64_t ldy) {
  DI_CHECK(int(experts.size()) == placement_.n_experts() && top_k > 0);
  const float* shared_out = nullptr;
  if (shared && m > 0) {  // as the kernel's shared group computes it: gate/up + SiLU, then down
    const int64_t inter = shared->gate->n_out;
    float* act = sized(shared_act_, size_t(m * inter));
    float* out = sized(shared_out_, size_t(m * hidden));
    backend_.swiglu({x, ldx, m, shared->gate, shared->up, act, inter});
    backend_.linear({act, inter, m, shared->down, out, hidden});
    shared_out = out;
  }
  if (Status s = exchange_and_compute(x, ldx, m, hidden, top_k, ids, experts); !s.ok()) {
    group_.fail(s);
    for (int64_t r = 0; r < m; ++r) std::fill_n(y + r * ldy, hidden, 0.0f);
    return;
  }
  const size_t n_assign = size_t(m * top_k);
  combine_expert_outputs(plan_, {ids, n_assign}, {weights, n_assign}, top_k,
                         reinterpret_cast<const float*>(back_recv_.data()), shared_out, hidden, y, ldy);
}

Status ExpertParallelMoe::exchange_and_compute(const float* x, int64_t ldx, int64_t m, int64_t hidden, int top_k,
                                               const int32_t* ids, std::span<const MlpWeightRefs> experts) {
  DI_RETURN_IF_ERROR(group_.health());
  const int n_ranks = placement_.n_ranks;
  const size_t n_assign = size_t(m * top_k);
  const int64_t rec = dispatch_record_bytes(hidden), back = return_record_bytes(hidden);

  // Dispatch: counts, then the records.
  plan_ = DispatchPlan::make({ids, n_assign}, placement_);
  send_.resize(n_assign * size_t(rec));
  pack_dispatch(plan_, x, ldx, hidden, {ids, n_assign}, top_k, send_);
  n_recv_.assign(size_t(n_ranks), 0);
  DI_RETURN_IF_ERROR(group_.exchange_counts(plan_.n_send, n_recv_));
  send_bytes_.resize(size_t(n_ranks));
  recv_bytes_.resize(size_t(n_ranks));
  int64_t n_received = 0;
  for (int r = 0; r < n_ranks; ++r) {
    if (n_recv_[size_t(r)] < 0 || n_recv_[size_t(r)] > (int64_t(1) << 40) / rec)
      return Status::Error("expert dispatch: rank " + std::to_string(r) + " announced " +
                           std::to_string(n_recv_[size_t(r)]) + " records");
    send_bytes_[size_t(r)] = plan_.n_send[size_t(r)] * rec;
    recv_bytes_[size_t(r)] = n_recv_[size_t(r)] * rec;
    n_received += n_recv_[size_t(r)];
  }
  recv_.resize(size_t(n_received * rec));
  DI_RETURN_IF_ERROR(group_.exchange(send_, send_bytes_, recv_, recv_bytes_));

  // The held experts on every received row (top_k 1, weight 1: the kernel's 0 + out * 1 is out).
  DI_ASSIGN_OR_RETURN(ReceivedRecords in, parse_dispatch(recv_, hidden, local_index_));
  back_send_.resize(size_t(n_received * back));
  if (in.n > 0) {
    local_refs_.clear();
    for (const int32_t e : local_experts_) local_refs_.push_back(experts[size_t(e)]);
    ones_.assign(size_t(in.n), 1.0f);
    backend_.moe({in.x, in.ldx, in.n, local_refs_.data(), int(local_refs_.size()), 1, in.local_ids.data(), ones_.data(),
                  nullptr, reinterpret_cast<float*>(back_send_.data()), hidden});
  }

  // Combine's inputs come back in the order they were sent.
  for (int r = 0; r < n_ranks; ++r) {
    std::swap(send_bytes_[size_t(r)], recv_bytes_[size_t(r)]);
    send_bytes_[size_t(r)] = send_bytes_[size_t(r)] / rec * back;
    recv_bytes_[size_t(r)] = recv_bytes_[size_t(r)] / rec * back;
  }
  back_recv_.resize(n_assign * size_t(back));
  return group_.exchange(back_send_, send_bytes_, back_recv_, recv_bytes_);
}

}  // namespace deepinfer
