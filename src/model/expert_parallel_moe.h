// The MoE layers' routed experts across an ExpertGroup: each layer's home rows go to the slots
// holding their experts (ExpertPlacement, one per MoE layer), are computed there by the
// backend's grouped MoE kernel, come back and are summed here with the routing weights
// (expert_dispatch.h). With f32 on the wire the result is bitwise the single-process kernel's: its rows are computed
// independently with a fixed reduction order (kernels/ops.h), an expert's output for a row does
// not depend on which rows share its group or which copy computes it, and the sum runs in the
// kernel's order. The shared experts run here, on the home rank, while the dispatched rows travel
// (ExpertGroup::exchange_start / exchange_finish).
//
// EPLB (EplbOptions): every `interval` forwards (the same forward on every rank: all ranks run
// the same number), the ranks add up the tokens each expert got over the last `window`
// forwards, compute the same new placements (eplb.h), bind the experts their new slots hold
// (through the model's Rebind) and switch, all inside that forward.
//
// Engine thread only. On a failed exchange, malformed records from a peer or a failed rebind,
// the group is failed (ExpertGroup::fail) and outputs are zeros: the caller learns of it from the
// group's health.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <vector>

#include "kernels/ops.h"
#include "model/eplb.h"
#include "model/expert_dispatch.h"
#include "model/expert_group.h"
#include "model/expert_load.h"

namespace deepinfer {

class ExpertParallelMoe {
 public:
  // Binds exactly `held` (ascending expert ids) of model layer `layer`, dropping the others.
  using Rebind = std::function<Status(int layer, std::span<const int32_t> held)>;
  // Computes, for n rows x [n, ldx], row i's output of routed expert expert_ids[i] (before the
  // routing weight) into out [n, hidden]; each row's result must not depend on the others.
  using RoutedExperts =
      std::function<void(const float* x, int64_t ldx, int64_t n, const int32_t* expert_ids, float* out)>;
  // Computes the shared experts' output of m rows x [m, ldx] into out [m, hidden].
  using SharedExperts = std::function<void(const float* x, int64_t ldx, int64_t m, float* out)>;

  // moe_layers: the model's MoE layer indices; every one starts with `initial`. load: where this
  // rank's loads are published, or null. n_expert_groups: the router's expert groups (n_group).
  // wire: F32 (bitwise the single process) or BF16 rows on the wire (expert_dispatch.h).
  ExpertParallelMoe(ExpertGroup& group, std::vector<int32_t> moe_layers, const ExpertPlacement& initial,
                    const EplbOptions& eplb, int n_expert_groups, ExpertLoad* load, Backend& backend,
                    DType wire = DType::F32);

  const ExpertPlacement& placement(int layer) const { return placements_[size_t(index_of(layer))]; }

  // Every rank calls this at the start of every forward (an empty one too); it may rebalance.
  void begin_forward(const Rebind& rebind);

  // x: [m, ldx] (the first `hidden` columns); ids, weights: [m, top_k] as routed on this rank;
  // experts: [n_experts] the layer's routed experts (only the held ones are read); shared: the
  // shared experts as one MLP, or null; y: [m, ldy]. Every rank calls this for every MoE layer,
  // an idle one with m = 0.
  void run(int layer, const float* x, int64_t ldx, int64_t m, int64_t hidden, int top_k, const int32_t* ids,
           const float* weights, std::span<const MlpWeightRefs> experts, const MlpWeightRefs* shared, float* y,
           int64_t ldy);
  // The same with the experts computed by the model (e.g. DeepSeek-V4's clamped SwiGLU):
  // n_experts: the layer's routed experts; `routed` is called on this rank's received rows, for
  // held experts only; shared may be empty (no shared experts).
  void run(int layer, const float* x, int64_t ldx, int64_t m, int64_t hidden, int top_k, const int32_t* ids,
           const float* weights, int n_experts, const RoutedExperts& routed, const SharedExperts& shared, float* y,
           int64_t ldy);

 private:
  int index_of(int layer) const;
  // Plans and packs the dispatch, exchanges the counts and starts the records' exchange.
  Status start_dispatch(const ExpertPlacement& placement, const float* x, int64_t ldx, int64_t m, int64_t hidden,
                        int top_k, const int32_t* ids);
  // Waits for the records, runs this rank's slots on them and exchanges the outputs back.
  Status finish_dispatch_and_compute(const ExpertPlacement& placement, int64_t hidden, const RoutedExperts& routed,
                                     int64_t n_assign);
  Status rebalance(const Rebind& rebind);

  ExpertGroup& group_;
  std::vector<int32_t> moe_layers_;
  std::vector<ExpertPlacement> placements_;  // [moe layer]
  EplbOptions eplb_;
  int n_expert_groups_;
  ExpertLoad* load_;
  Backend& backend_;
  DType wire_;
  int64_t n_forwards_ = 0;
  std::vector<std::vector<int64_t>> counts_;         // [moe layer][expert]: this period's tokens from here
  std::deque<std::vector<std::vector<int64_t>>> periods_;  // the last periods' counts, oldest first

  // Scratch, reused across layers and steps.
  DispatchPlan plan_;
  std::vector<int32_t> local_index_;  // [n_slots]: index in local_slots(), or -1
  std::vector<uint8_t> send_, recv_, back_send_, back_recv_;
  std::vector<int64_t> n_recv_, send_bytes_, recv_bytes_;
  std::vector<int32_t> record_experts_, local_of_, local_ids_;
  std::vector<MlpWeightRefs> local_refs_;
  std::vector<float> ones_, shared_act_, shared_out_, expert_out_, back_f32_;
};

}  // namespace deepinfer
