// One MoE layer's routed experts across an ExpertGroup: the home rank's rows go to the ranks
// holding their experts, are computed there by the backend's grouped MoE kernel, come back and
// are summed here with the routing weights (expert_dispatch.h). The result is bitwise the
// single-process kernel's: its rows are computed independently with a fixed reduction order
// (kernels/ops.h), an expert's output for a row does not depend on which rows share its group,
// and the sum runs in the kernel's order. The shared experts run here, on the home rank.
//
// Engine thread only. On a failed exchange, or malformed records from a peer, the group is
// failed (ExpertGroup::fail) and y gets zeros: the caller learns of it from the group's health.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/ops.h"
#include "model/expert_dispatch.h"
#include "model/expert_group.h"

namespace deepinfer {

class ExpertParallelMoe {
 public:
  ExpertParallelMoe(ExpertGroup& group, ExpertPlacement placement, Backend& backend);

  const ExpertPlacement& placement() const { return placement_; }

  // x: [m, ldx] (the first `hidden` columns); ids, weights: [m, top_k] as routed on this rank;
  // experts: [n_experts] the layer's routed experts (only the held ones are read); shared: the
  // shared experts as one MLP, or null; y: [m, ldy]. Every rank calls this for every MoE layer,
  // an idle one with m = 0.
  void run(const float* x, int64_t ldx, int64_t m, int64_t hidden, int top_k, const int32_t* ids, const float* weights,
           std::span<const MlpWeightRefs> experts, const MlpWeightRefs* shared, float* y, int64_t ldy);

 private:
  Status exchange_and_compute(const float* x, int64_t ldx, int64_t m, int64_t hidden, int top_k, const int32_t* ids,
                              std::span<const MlpWeightRefs> experts);

  ExpertGroup& group_;
  ExpertPlacement placement_;
  Backend& backend_;
  std::vector<int32_t> local_index_;  // [n_experts]: index in placement_.local_experts(), or -1
  std::vector<int32_t> local_experts_;

  // Scratch, reused across layers and steps.
  DispatchPlan plan_;
  std::vector<uint8_t> send_, recv_, back_send_, back_recv_;
  std::vector<int64_t> n_recv_, send_bytes_, recv_bytes_;
  std::vector<MlpWeightRefs> local_refs_;
  std::vector<float> ones_, shared_act_, shared_out_;
};

}  // namespace deepinfer
