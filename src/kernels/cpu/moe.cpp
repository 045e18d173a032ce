// MoE: rows grouped by expert (a counting sort, rows ascending within an expert), then one
// parallel region runs gate+up+SiLU for every (expert, column block), the down projections,
// and the per-row weighted sum in increasing expert id (per element a product, then a sum, each
// rounded; vectorized across the elements, which changes no bit). The shared experts are one more
// group holding every row. Scratch buffers live per calling thread and are reused across calls.
// Weights with act_dtype BF16 get the inputs (x for gate/up, the SwiGLU output for down)
// rounded to bf16 once per call, before the phase that reads them; on levels that pack (gemm.h's
// runs_packed: amx's token tiles, avx512bf16's pair tiles, avx512bf16-fma's split rows) each expert's
// rows are packed instead, per expert and projection kind.
#include "kernels/cpu/moe.h"

#include <algorithm>
#include <vector>

#include "core/aligned_vector.h"
#include "core/check.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/work_split.h"

namespace deepinfer::cpu {
namespace {

struct Group {  // one expert's rows: assignments [begin, begin + n) of the sorted order
  const MlpWeightRefs* mlp;
  int64_t begin, n;
  bool pack_up = false, pack_down = false;  // its gate/up, its down projection run packed (runs_packed)
};

struct Task {  // columns [o0, o1) of group g
  int g;
  int64_t o0, o1;
};

struct MoeScratch {
  std::vector<int64_t> count;        // [n_experts + 1]
  std::vector<int64_t> slot;         // [m, top_k]: sorted index of the row's j-th assignment
  std::vector<const float*> x_rows;  // [n_assign]: input row of each sorted assignment
  std::vector<const float*> act_rows;
  AlignedVector<float> act;          // [n_assign, ld_act]
  AlignedVector<float> out;          // [n_assign, hidden]
  Bf16Rows x_bf16;                   // [m, hidden], when an expert's gate/up wants bf16 inputs
  std::vector<const uint16_t*> x_rows_bf16;    // [n_assign]
  AlignedVector<uint16_t> act_bf16;            // [n_assign, ld_act], when a down projection does
  std::vector<const uint16_t*> act_rows_bf16;  // [n_assign]
  AlignedVector<uint16_t> x_packed, act_packed;  // per group: its rows packed (runs_packed)
  std::vector<int64_t> x_packed_at, act_packed_at;  // [groups]: offsets into them
  std::vector<Group> groups;
  std::vector<Task> up_tasks, down_tasks;
};

// The calling thread's scratch; OpenMP workers must use the caller's, through a reference.
MoeScratch& moe_scratch() {
  thread_local MoeScratch s;
  return s;
}

void add_tasks(std::vector<Task>& tasks, int g, int64_t n_out, int64_t nb) {
  for (int64_t o = 0; o < n_out; o += nb) tasks.push_back({g, o, std::min(n_out, o + nb)});
}

}  // namespace

void moe(const MoeParams& p) {
  if (p.m == 0) return;
  DI_CHECK(p.x && p.y && p.experts && p.expert_ids && p.expert_weights && p.n_experts > 0 && p.top_k > 0);
  const LinearWeight& g0 = *p.experts[0].gate;
  const int64_t d = g0.n_in, inter = g0.n_out, m = p.m, k = p.top_k;
  DI_CHECK(p.ldx >= d && p.ldy >= d);
  const int64_t inter_shared = p.shared ? p.shared->gate->n_out : 0;
  const int64_t ld_act = std::max(inter, inter_shared);
  const int64_t n_assign = m * k + (p.shared ? m : 0);

  DI_CHECK(k <= 64);
  // One activation precision per projection kind across the routed and shared experts.
  const bool up_bf16 = g0.act_dtype == DType::BF16, down_bf16 = p.experts[0].down->act_dtype == DType::BF16;
  MoeScratch& s = moe_scratch();
  const KernelTable& kt = kernels();
  // Packed blocks per expert and projection kind, where its weights take them (the routed experts
  // and the shared one may differ: FP4 experts beside an fp8 shared expert, say); bf16 rows for the rest.
  const auto packs_up = [&](const MlpWeightRefs& w) { return up_bf16 && runs_packed(*w.gate) && runs_packed(*w.up); };
  const auto packs_down = [&](const MlpWeightRefs& w) { return down_bf16 && runs_packed(*w.down); };
  bool all_pack_up = true, all_pack_down = true;
  for (int e = 0; e <= p.n_experts; ++e) {
    const MlpWeightRefs* w = e < p.n_experts ? &p.experts[e] : p.shared;
    if (!w) continue;
    all_pack_up = all_pack_up && packs_up(*w);
    all_pack_down = all_pack_down && packs_down(*w);
  }
  const uint16_t* const* xb =
      up_bf16 && !all_pack_up ? bf16_rows(strided_rows(p.x, p.ldx, m), m, d, s.x_bf16) : nullptr;
  s.count.assign(size_t(p.n_experts) + 1, 0);
  for (int64_t i = 0; i < m * k; ++i) {
    DI_CHECK(p.expert_ids[i] >= 0 && p.expert_ids[i] < p.n_experts);
    ++s.count[size_t(p.expert_ids[i]) + 1];
  }
  for (int e = 0; e < p.n_experts; ++e) s.count[size_t(e) + 1] += s.count[size_t(e)];
  s.slot.resize(size_t(m * k));
  s.x_rows.resize(size_t(n_assign));
  s.x_rows_bf16.resize(up_bf16 ? size_t(n_assign) : 0);
  s.act_rows.resize(size_t(n_assign));
  s.act.resize(size_t(n_assign * ld_act));
  s.out.resize(size_t(n_assign * d));
  {
    std::vector<int64_t>& next = s.count;  // advanced to each expert's end, then shifted back
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < k; ++j) {
        const int64_t at = next[size_t(p.expert_ids[r * k + j])]++;
        s.slot[size_t(r * k + j)] = at;
        s.x_rows[size_t(at)] = p.x + r * p.ldx;
        if (xb) s.x_rows_bf16[size_t(at)] = xb[r];
      }
    for (int e = p.n_experts; e > 0; --e) next[size_t(e)] = next[size_t(e) - 1];
    next[0] = 0;
  }
  if (p.shared)
    for (int64_t r = 0; r < m; ++r) {
      s.x_rows[size_t(m * k + r)] = p.x + r * p.ldx;
      if (xb) s.x_rows_bf16[size_t(m * k + r)] = xb[r];
    }
  for (int64_t i = 0; i < n_assign; ++i) s.act_rows[size_t(i)] = s.act.data() + i * ld_act;
  if (down_bf16 && !all_pack_down) {
    s.act_bf16.resize(size_t(n_assign * ld_act));
    s.act_rows_bf16.resize(size_t(n_assign));
    for (int64_t i = 0; i < n_assign; ++i) s.act_rows_bf16[size_t(i)] = s.act_bf16.data() + i * ld_act;
  }

  s.groups.clear();
  for (int e = 0; e < p.n_experts; ++e) {
    const int64_t n = s.count[size_t(e) + 1] - s.count[size_t(e)];
    if (n > 0)
      s.groups.push_back({&p.experts[e], s.count[size_t(e)], n, packs_up(p.experts[e]), packs_down(p.experts[e])});
  }
  if (p.shared) s.groups.push_back({p.shared, m * k, m, packs_up(*p.shared), packs_down(*p.shared)});
  s.up_tasks.clear();
  s.down_tasks.clear();
  s.x_packed_at.assign(1, 0);
  s.act_packed_at.assign(1, 0);
  for (int g = 0; g < int(s.groups.size()); ++g) {
    const MlpWeightRefs& w = *s.groups[size_t(g)].mlp;
    const bool pack_up = s.groups[size_t(g)].pack_up, pack_down = s.groups[size_t(g)].pack_down;
    DI_CHECK(w.gate->n_in == d && w.down->n_out == d && w.down->n_in == w.gate->n_out);
    DI_CHECK(w.up->dtype == w.gate->dtype && w.up->n_out == w.gate->n_out && w.up->n_in == d);
    DI_CHECK_MSG(w.gate->act_dtype == g0.act_dtype && w.up->act_dtype == g0.act_dtype &&
                     w.down->act_dtype == p.experts[0].down->act_dtype,
                 "every expert's projections need the same activation dtype");
    DI_CHECK_MSG((w.gate->act_dtype == DType::F32 ||
                  (admits_bf16_activations(*w.gate) && w.up->block_cols == w.gate->block_cols)) &&
                     (w.down->act_dtype == DType::F32 || admits_bf16_activations(*w.down)),
                 "bf16 activations need bf16 weights or fp8 weights with blocks of a multiple of 32 columns");
    DI_CHECK_MSG((pack_up || (!w.gate->tile_major && !w.up->tile_major)) && (pack_down || !w.down->tile_major),
                 "tile-major fp8 experts run only on the packed blocks of a level that relays them");
    const int64_t up_row_bytes = 2 * weight_row_bytes(*w.gate), down_row_bytes = weight_row_bytes(*w.down);
    const int64_t n = s.groups[size_t(g)].n;
    add_tasks(s.up_tasks, g, w.gate->n_out,
              pack_up ? packed_column_block(w.gate->n_out, d, up_row_bytes, up_row_bytes, n)
                      : column_block(w.gate->n_out, up_row_bytes));
    add_tasks(s.down_tasks, g, d,
              pack_down ? packed_column_block(d, w.down->n_in, down_row_bytes, down_row_bytes, n) : column_block(d, down_row_bytes));
    s.x_packed_at.push_back(s.x_packed_at.back() + (pack_up ? kt.packed_elems(n, d) : 0));
    s.act_packed_at.push_back(s.act_packed_at.back() + (pack_down ? kt.packed_elems(n, w.down->n_in) : 0));
  }
  s.x_packed.resize(size_t(s.x_packed_at.back()));
  s.act_packed.resize(size_t(s.act_packed_at.back()));

  const int n_groups = int(s.groups.size());
#pragma omp parallel
  {
#pragma omp for schedule(dynamic, 1)
    for (int g = 0; g < n_groups; ++g)
      if (s.groups[size_t(g)].pack_up)
        kt.pack_bf16x(s.x_rows.data() + s.groups[size_t(g)].begin, s.groups[size_t(g)].n, d,
                      s.x_packed.data() + s.x_packed_at[size_t(g)]);
#pragma omp for schedule(dynamic, 1)
    for (size_t t = 0; t < s.up_tasks.size(); ++t) {
      const Task& task = s.up_tasks[t];
      const Group& g = s.groups[size_t(task.g)];
      float* y = s.act.data() + g.begin * ld_act + task.o0;
      if (g.pack_up) kt.swiglu_block_packed(s.x_packed.data() + s.x_packed_at[size_t(task.g)], g.n, *g.mlp->gate, *g.mlp->up, task.o0, task.o1, y, ld_act);
      else if (up_bf16) kt.swiglu_block_bf16x(s.x_rows_bf16.data() + g.begin, g.n, *g.mlp->gate, *g.mlp->up, task.o0, task.o1, y, ld_act);
      else kt.swiglu_block(s.x_rows.data() + g.begin, g.n, *g.mlp->gate, *g.mlp->up, task.o0, task.o1, y, ld_act);
    }
#pragma omp for schedule(dynamic, 1)
    for (int g = 0; g < n_groups; ++g) {
      const Group& gr = s.groups[size_t(g)];
      if (gr.pack_down) {
        kt.pack_bf16x(s.act_rows.data() + gr.begin, gr.n, gr.mlp->down->n_in,
                      s.act_packed.data() + s.act_packed_at[size_t(g)]);
      } else if (down_bf16) {
        for (int64_t i = gr.begin; i < gr.begin + gr.n; ++i)
          kt.round_to_bf16(s.act_rows[size_t(i)], s.act_bf16.data() + i * ld_act, gr.mlp->down->n_in);
      }
    }
#pragma omp for schedule(dynamic, 1)
    for (size_t t = 0; t < s.down_tasks.size(); ++t) {
      const Task& task = s.down_tasks[t];
      const Group& g = s.groups[size_t(task.g)];
      float* y = s.out.data() + g.begin * d + task.o0;
      if (g.pack_down) kt.linear_block_packed(s.act_packed.data() + s.act_packed_at[size_t(task.g)], g.n, *g.mlp->down, task.o0, task.o1, y, d);
      else if (down_bf16) kt.linear_block_bf16x(s.act_rows_bf16.data() + g.begin, g.n, *g.mlp->down, task.o0, task.o1, y, d);
      else kt.linear_block(s.act_rows.data() + g.begin, g.n, *g.mlp->down, task.o0, task.o1, y, d);
    }
#pragma omp for schedule(static)
    for (int64_t r = 0; r < m; ++r) {
      int64_t order[64];  // the row's assignment indices j, by increasing expert id
      for (int64_t j = 0; j < k; ++j) order[j] = j;
      std::sort(order, order + k, [&](int64_t a, int64_t b) { return p.expert_ids[r * k + a] < p.expert_ids[r * k + b]; });
      float* y = p.y + r * p.ldy;
      std::fill_n(y, d, 0.0f);
      for (int64_t i = 0; i < k; ++i) {
        const int64_t j = order[i];
        const float wt = p.expert_weights[r * k + j];
        const float* src = s.out.data() + s.slot[size_t(r * k + j)] * d;
#pragma omp simd
        for (int64_t c = 0; c < d; ++c) y[c] += src[c] * wt;
      }
      if (p.shared) {
        const float* src = s.out.data() + (m * k + r) * d;
#pragma omp simd
        for (int64_t c = 0; c < d; ++c) y[c] += src[c];
      }
    }
  }
}

}  // namespace deepinfer::cpu
