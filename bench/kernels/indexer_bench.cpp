// The lightning indexer's scores (cpu::indexer_scores) at DeepSeek-V4's shape, 64 heads of 128,
// over n_keys keys with bf16, FP4 (V4.1's e2m1 keys) or fp8 (V4's fp8 cache) rows, on each ISA
// level this CPU runs (so that levels compare side by side in one run). GFLOPs counts 2 * heads *
// dim per key; bytes_per_second the key bytes read.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/indexer_scores.h"
#include "core/dtype.h"
#include "kernels/cpu/isa.h"

namespace deepinfer {
namespace {

constexpr int kHeads = 64, kDim = 128;

// args: key dtype (0 bf16, 1 FP4, 2 fp8), n_keys, ISA level (cpu::Isa as an integer)
void BM_IndexerScores(benchmark::State& state) {
  const DType dtype = state.range(0) == 0 ? DType::BF16 : state.range(0) == 1 ? DType::F4_E2M1 : DType::F8_E4M3;
  const int64_t n_keys = state.range(1);
  const auto isa = cpu::Isa(state.range(2));
  const cpu::Isa saved = cpu::active_isa();
  if (!cpu::set_active_isa(isa)) {
    state.SkipWithError("ISA level not on this CPU");
    return;
  }
  state.SetLabel(std::string(cpu::isa_name(isa)));
  const int64_t row_bytes = dtype == DType::BF16 ? kDim * 2 : dtype == DType::F4_E2M1 ? kDim / 2 + kDim / 32 : kDim + 4;
  std::vector<uint8_t> keys(size_t(n_keys * row_bytes));
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (int64_t e = 0; e < n_keys; ++e) {
    uint8_t* row = keys.data() + e * row_bytes;
    // Normal values (no subnormal products, which would slow the FMA levels down): bf16 of normal
    // floats; FP4 any nibbles, scale bytes 120..127; e4m3 codes of magnitude 2^-6..2^1, scale 0.01.
    if (dtype == DType::BF16)
      for (int64_t d = 0; d < kDim; ++d) {
        const uint16_t b = f32_to_bf16(normal(rng));
        std::memcpy(row + 2 * d, &b, 2);
      }
    else
      for (int64_t b = 0; b < row_bytes; ++b) row[b] = uint8_t(rng() & (dtype == DType::F4_E2M1 ? 0xff : 0x3f));
    if (dtype == DType::F4_E2M1)
      for (int b = 0; b < kDim / 32; ++b) row[kDim / 2 + b] = uint8_t(120 + rng() % 8);
    if (dtype == DType::F8_E4M3) {
      const float scale = 0.01f;
      std::memcpy(row + kDim, &scale, 4);
    }
  }
  std::vector<const void*> rows(static_cast<size_t>(n_keys));
  for (int64_t e = 0; e < n_keys; ++e) rows[size_t(e)] = keys.data() + e * row_bytes;
  std::vector<float> q(size_t(kHeads) * kDim), w(static_cast<size_t>(kHeads)), scores(static_cast<size_t>(n_keys));
  for (float& v : q) v = normal(rng);
  for (float& v : w) v = normal(rng);
  const IndexerScoresParams p{q.data(), w.data(), rows.data(), dtype, scores.data(), kHeads, kDim, n_keys};
  for (auto _ : state) {
    cpu::indexer_scores(p);
    benchmark::DoNotOptimize(scores.data());
  }
  cpu::set_active_isa(saved);
  state.SetBytesProcessed(int64_t(state.iterations()) * n_keys * row_bytes);
  const double flops = 2.0 * double(n_keys) * kHeads * kDim;
  state.counters["GFLOPs"] = benchmark::Counter(flops * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_IndexerScores)
    ->ArgNames({"dtype", "keys", "isa"})
    ->ArgsProduct({{0, 1, 2},
                   {4096, 65536},
                   {int(cpu::Isa::kAvx512), int(cpu::Isa::kAvx512Bf16), int(cpu::Isa::kAvx512Bf16Fma), int(cpu::Isa::kAmx)}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace deepinfer
