// DeepSeek-V4's expert layer (reused by V4.1): routed SwiGLU experts with the gate clamped
// above and the up projection clamped both ways at swiglu_limit, plus the shared expert
// unclamped (as DeepSeek's inference/model.py; V4.1 clamps it too: shared_limit):
//   y = sum_j weight_j * w2(silu(min(w1 x, L)) * clamp(w3 x, -L, L)) + shared(x)
// Rows are grouped by expert (each expert's weights stream once per call); with at least two
// experts with rows per thread, each thread runs whole experts. Each row sums its experts in
// increasing id, so its result does not depend on its batch neighbours nor on the threads.
#pragma once

#include <cstdint>
#include <vector>

#include "core/aligned_vector.h"
#include "kernels/ops.h"
#include "model/expert_parallel_moe.h"

namespace deepinfer {

struct ExpertWeights {  // gate w1, up w3, down w2
  LinearWeight w1;  // [inter, hidden]
  LinearWeight w3;  // [inter, hidden]
  LinearWeight w2;  // [hidden, inter]
};

struct ClampedMoeScratch {
  AlignedVector<float> x, gate, up, out, acc, packed, ones;
  std::vector<int32_t> rows, starts, cursor;  // the (row, j) pairs grouped by expert
  std::vector<int> active;                    // the experts with rows, in increasing id
};

// One expert on m rows: out [m, hidden] = w2(silu(min(w1 x, L)) * clamp(w3 x, -L, L)) for
// x [m, hidden]; limit 0: no clamp. Each row's result does not depend on the others.
void clamped_expert_mlp(Backend& backend, const ExpertWeights& e, const float* x, int64_t m, int64_t hidden,
                        float limit, float* out, ClampedMoeScratch& s);

// x: [n, hidden]; ids, weights: [n, top_k]; y: [n, hidden]. shared may be nullptr; shared_limit
// clamps it as the routed experts (0: no clamp).
void clamped_moe(Backend& backend, const std::vector<ExpertWeights>& experts, const ExpertWeights* shared,
                 float swiglu_limit, const float* x, int64_t n, int64_t hidden, int top_k, const int32_t* ids,
                 const float* weights, float* y, ClampedMoeScratch& s, float shared_limit = 0.0f);

// clamped_moe's layer across an expert-parallel group (expert_parallel_moe.h), bitwise its result:
// the rows' routing (ids, weights) was made here; each row goes to the ranks holding its experts,
// which run it through one expert each (clamped_moe with top_k 1, weight 1: its 0 + out * 1 is
// out), and the combine sums in clamped_moe's order. experts: only the held ones are read. Every
// rank calls it for every MoE layer, an idle one with n = 0.
void clamped_moe_expert_parallel(ExpertParallelMoe& ep, int layer, Backend& backend,
                                 const std::vector<ExpertWeights>& experts, const ExpertWeights* shared,
                                 float swiglu_limit, const float* x, int64_t n, int64_t hidden, int top_k,
                                 const int32_t* ids, const float* weights, float* y, ClampedMoeScratch& s,
                                 float shared_limit = 0.0f);

}  // namespace deepinfer
