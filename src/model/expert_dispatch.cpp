#include "model/expert_dispatch.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "core/check.h"

namespace deepinfer {

DispatchPlan DispatchPlan::make(std::span<const int32_t> ids, const ExpertPlacement& placement) {
  DispatchPlan p;
  p.n_send.assign(size_t(placement.n_ranks), 0);
  p.slot.resize(ids.size());
  std::vector<int64_t> turn(size_t(placement.n_experts()), 0);  // assignments of each expert so far
  for (size_t a = 0; a < ids.size(); ++a) {
    DI_CHECK(ids[a] >= 0 && ids[a] < placement.n_experts());
    p.slot[a] = placement.slot_for(ids[a], turn[size_t(ids[a])]++);
    ++p.n_send[size_t(placement.slot_rank[size_t(p.slot[a])])];
  }
  std::vector<int64_t> next(size_t(placement.n_ranks), 0);
  for (int r = 1; r < placement.n_ranks; ++r) next[size_t(r)] = next[size_t(r) - 1] + p.n_send[size_t(r) - 1];
  p.send_order.resize(ids.size());
  p.position.resize(ids.size());
  for (size_t a = 0; a < ids.size(); ++a) {
    const int64_t at = next[size_t(placement.slot_rank[size_t(p.slot[a])])]++;
    p.send_order[size_t(at)] = int32_t(a);
    p.position[a] = at;
  }
  return p;
}

void rows_to_wire(const float* src, int64_t ld, int64_t n, int64_t hidden, DType wire, uint8_t* out) {
  DI_CHECK(wire == DType::F32 || wire == DType::BF16);
  for (int64_t r = 0; r < n; ++r) {
    if (wire == DType::F32) {
      std::memcpy(out + r * hidden * 4, src + r * ld, size_t(hidden) * 4);
      continue;
    }
    for (int64_t c = 0; c < hidden; ++c) {
      const uint16_t v = f32_to_bf16(src[r * ld + c]);
      std::memcpy(out + (r * hidden + c) * 2, &v, 2);
    }
  }
}

void rows_from_wire(const uint8_t* in, int64_t n, int64_t hidden, DType wire, float* dst, int64_t ld) {
  DI_CHECK(wire == DType::F32 || wire == DType::BF16);
  for (int64_t r = 0; r < n; ++r) {
    if (wire == DType::F32) {
      std::memcpy(dst + r * ld, in + r * hidden * 4, size_t(hidden) * 4);
      continue;
    }
    for (int64_t c = 0; c < hidden; ++c) {
      uint16_t v;
      std::memcpy(&v, in + (r * hidden + c) * 2, 2);
      dst[r * ld + c] = bf16_to_f32(v);
    }
  }
}

void pack_dispatch(const DispatchPlan& plan, const float* x, int64_t ldx, int64_t hidden, std::span<const int32_t> ids,
                   int top_k, std::span<uint8_t> out, DType wire) {
  const int64_t rec = dispatch_record_bytes(hidden, wire);
  DI_CHECK(top_k > 0 && ids.size() == plan.send_order.size() && ids.size() % size_t(top_k) == 0);
  DI_CHECK(int64_t(out.size()) >= int64_t(ids.size()) * rec);
  for (size_t i = 0; i < plan.send_order.size(); ++i) {
    uint8_t* p = out.data() + int64_t(i) * rec;
    const int32_t a = plan.send_order[i];
    const int32_t header[2] = {plan.slot[size_t(a)], 0};
    std::memcpy(p, header, 8);
    rows_to_wire(x + int64_t(a / top_k) * ldx, ldx, 1, hidden, wire, p + 8);
  }
}

Status check_announced_counts(std::span<const int64_t> n_records, int64_t record_bytes) {
  const int64_t limit = (int64_t(1) << 40) / record_bytes;
  int64_t total = 0;
  for (size_t r = 0; r < n_records.size(); ++r) {
    if (n_records[r] < 0 || n_records[r] > limit - total)
      return Status::Error("expert dispatch: rank " + std::to_string(r) + " announced " + std::to_string(n_records[r]) +
                           " records");
    total += n_records[r];
  }
  return Status::Ok();
}

Result<ReceivedRecords> parse_dispatch(std::span<const uint8_t> bytes, int64_t hidden,
                                       std::span<const int32_t> local_index, DType wire) {
  const int64_t rec = dispatch_record_bytes(hidden, wire);
  if (int64_t(bytes.size()) % rec != 0)
    return Status::Error("expert dispatch: " + std::to_string(bytes.size()) + " bytes are not whole records of " +
                         std::to_string(rec) + " bytes");
  ReceivedRecords r;
  r.n = int64_t(bytes.size()) / rec;
  if (wire == DType::F32) {
    r.ldx = rec / 4;
    r.x = r.n > 0 ? reinterpret_cast<const float*>(bytes.data() + 8) : nullptr;
  }
  r.local_ids.resize(size_t(r.n));
  for (int64_t i = 0; i < r.n; ++i) {
    int32_t header[2];
    std::memcpy(header, bytes.data() + i * rec, 8);
    const int32_t e = header[0];
    if (e < 0 || e >= int32_t(local_index.size()) || local_index[size_t(e)] < 0 || header[1] != 0)
      return Status::Error("expert dispatch: record " + std::to_string(i) + " names slot " + std::to_string(e) +
                           ", which is not on this rank");
    r.local_ids[size_t(i)] = local_index[size_t(e)];
  }
  if (wire != DType::F32) {
    r.widened.resize(size_t(r.n * hidden));
    for (int64_t i = 0; i < r.n; ++i) rows_from_wire(bytes.data() + i * rec + 8, 1, hidden, wire, r.widened.data() + i * hidden, hidden);
    r.ldx = hidden;
    r.x = r.widened.data();
  }
  return r;
}

void combine_expert_outputs(const DispatchPlan& plan, std::span<const int32_t> ids, std::span<const float> weights,
                            int top_k, const float* outputs, const float* shared, int64_t hidden, float* y,
                            int64_t ldy) {
  DI_CHECK(top_k > 0 && top_k <= 64 && ids.size() == weights.size() && ids.size() % size_t(top_k) == 0);
  const int64_t m = int64_t(ids.size()) / top_k, k = top_k;
  for (int64_t r = 0; r < m; ++r) {
    int64_t order[64];  // the row's assignments by increasing expert id, as the kernel sums them
    for (int64_t j = 0; j < k; ++j) order[j] = j;
    std::sort(order, order + k, [&](int64_t a, int64_t b) { return ids[size_t(r * k + a)] < ids[size_t(r * k + b)]; });
    float* out = y + r * ldy;
    std::fill_n(out, hidden, 0.0f);
    for (int64_t i = 0; i < k; ++i) {
      const int64_t a = r * k + order[i];
      const float wt = weights[size_t(a)];
      const float* src = outputs + plan.position[size_t(a)] * hidden;
      for (int64_t c = 0; c < hidden; ++c) out[c] += src[c] * wt;
    }
    if (shared) {
      const float* src = shared + r * hidden;
      for (int64_t c = 0; c < hidden; ++c) out[c] += src[c];
    }
  }
}

}  // namespace deepinfer
