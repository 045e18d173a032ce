// What an expert-parallel rank receives from its peers, on arbitrary bytes: the announced record
// counts and the dispatch records (model/expert_dispatch.h). Each either fails with a Status or
// is safe to use: every parsed record's slot is one of this rank's, every row readable.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "model/expert_dispatch.h"

using namespace deepinfer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  // First byte: the row width and the wire dtype; second: which of 8 slots are on this rank.
  const int64_t hidden = 1 + data[0] % 8;
  const DType wire = data[0] & 0x80 ? DType::BF16 : DType::F32;
  std::vector<int32_t> local_index(8, -1);
  int32_t n_local = 0;
  for (int s = 0; s < 8; ++s)
    if (data[1] & (1 << s)) local_index[size_t(s)] = n_local++;
  const std::span<const uint8_t> rest(data + 2, size - 2);

  std::vector<int64_t> counts(rest.size() / 8);
  if (!counts.empty()) std::memcpy(counts.data(), rest.data(), counts.size() * 8);
  (void)check_announced_counts(counts, dispatch_record_bytes(hidden, wire));

  std::vector<uint8_t> bytes(rest.begin(), rest.end());  // as received: a buffer of its own
  auto r = parse_dispatch(bytes, hidden, local_index, wire);
  if (!r.ok()) return 0;
  if (r->local_ids.size() != size_t(r->n) || r->n * dispatch_record_bytes(hidden, wire) != int64_t(bytes.size()))
    std::abort();
  float sum = 0;
  for (int64_t i = 0; i < r->n; ++i) {
    if (r->local_ids[size_t(i)] < 0 || r->local_ids[size_t(i)] >= n_local) std::abort();
    for (int64_t c = 0; c < hidden; ++c) sum += r->x[i * r->ldx + c];
  }
  volatile float sink = sum;
  (void)sink;
  return 0;
}
