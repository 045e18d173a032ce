// Linear-layer kernels at DeepSeek-V2-Lite shapes: GEMV bandwidth (bytes_per_second counts
// weight bytes) and batched GEMM throughput (the GFLOPs counter), per weight dtype, plus the
// fused SwiGLU and a full MoE layer. Weights are random and larger than the caches where the
// shape allows. DEEPINFER_CPU_ISA selects the instruction set (isa.h). The first argument, `w`,
// picks the weights: 0 bf16, 1 fp8, 2 bf16 with bf16 activations (LinearWeight::act_dtype),
// 3 fp8 with bf16 activations, 4 fp8 with 32 x 32 scale blocks (V4.1) and bf16 activations,
// 5 FP4 (e2m1, UE8M0 scale per 32; DeepSeek-V4's experts), 6 FP4 with bf16 activations.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/moe.h"

namespace deepinfer {
namespace {

struct BenchWeight {
  LinearWeight w;
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
  std::vector<uint8_t> scale_bytes;  // FP4
  BenchWeight(int64_t kind, int64_t n_out, int64_t n_in) {
    const DType t = kind >= 5 ? DType::F4_E2M1 : kind == 1 || kind >= 3 ? DType::F8_E4M3 : DType::BF16;
    w.dtype = t;
    if (kind >= 2 && kind != 5) w.act_dtype = DType::BF16;
    if (kind == 4) w.block_rows = w.block_cols = 32;
    w.n_out = n_out;
    w.n_in = n_in;
    bytes.resize(size_t(n_out * n_in) * dtype_size(t) / (t == DType::F4_E2M1 ? 2 : 1));
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.0f, 0.02f);
    if (t == DType::BF16)  // normal values (denormals would cost f32 FMAs microcode assists on Intel)
      for (size_t i = 0; i < bytes.size() / 2; ++i) reinterpret_cast<uint16_t*>(bytes.data())[i] = f32_to_bf16(dist(rng));
    else if (t == DType::F4_E2M1) {  // any nibbles, scales around 2^-8 (normal products)
      for (uint8_t& b : bytes) b = uint8_t(rng());
      scale_bytes.resize(size_t(n_out * n_in / 32));
      for (uint8_t& e : scale_bytes) e = uint8_t(116 + rng() % 8);
      w.scale_e8m0 = scale_bytes.data();
    } else
      for (uint8_t& b : bytes) {  // any e4m3 code but NaN
        const uint8_t c = uint8_t(rng());
        b = (c & 0x7f) == 0x7f ? 0 : c;
      }
    w.data = bytes.data();
    if (t == DType::F8_E4M3) {
      scales.assign(size_t(((n_out + w.block_rows - 1) / w.block_rows) * ((n_in + w.block_cols - 1) / w.block_cols)), 1e-3f);
      w.scale_inv = scales.data();
    }
  }
};

std::vector<float> activations(int64_t n) {
  std::vector<float> x(static_cast<size_t>(n));
  std::mt19937 rng(2);
  std::normal_distribution<float> d;
  for (float& v : x) v = d(rng);
  return x;
}

// args: w, m, n_out, n_in. Several weights in rotation (1 GiB, beyond a large L3) so m = 1
// never reads from cache.
void BM_Linear(benchmark::State& state) {
  const int64_t t = state.range(0);
  const int64_t m = state.range(1), n_out = state.range(2), n_in = state.range(3);
  const int64_t w_bytes = t >= 5 ? n_out * n_in / 2 + n_out * n_in / 32 : n_out * n_in * (t == 1 || t >= 3 ? 1 : 2);
  const int n_w = int(std::max<int64_t>(1, (int64_t(1) << 30) / w_bytes));
  std::vector<BenchWeight> ws;
  for (int i = 0; i < n_w; ++i) ws.emplace_back(t, n_out, n_in);
  const std::vector<float> x = activations(m * n_in);
  std::vector<float> y(size_t(m * n_out));
  int i = 0;
  for (auto _ : state) {
    cpu::linear({x.data(), n_in, m, &ws[size_t(i)].w, y.data(), n_out});
    i = (i + 1) % n_w;
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * w_bytes);
  state.counters["GFLOPs"] =
      benchmark::Counter(2.0 * double(m * n_out * n_in) * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Linear)
    ->ArgNames({"w", "m", "n_out", "n_in"})
    ->ArgsProduct({{0, 1, 2, 3, 4, 5, 6}, {1}, {10944}, {2048}})
    ->ArgsProduct({{0, 1, 2, 3, 4, 5, 6}, {1}, {2048}, {10944}})
    ->ArgsProduct({{0, 1, 2, 3, 4, 5, 6}, {8, 32, 64, 128, 256}, {2816}, {2048}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// A MoE layer of V2-Lite shape (64 experts of 1408, top-6, 2 shared) at m rows with random routing.
void BM_Moe(benchmark::State& state) {
  const int64_t t = state.range(0);
  const int64_t m = state.range(1), d = 2048, inter = 1408;
  const int E = 64, k = 6;
  std::vector<BenchWeight> ws;
  ws.reserve(size_t(3 * E + 3));
  std::vector<MlpWeightRefs> experts;
  for (int e = 0; e < E; ++e) {
    ws.emplace_back(t, inter, d);
    ws.emplace_back(t, inter, d);
    ws.emplace_back(t, d, inter);
  }
  ws.emplace_back(t, 2 * inter, d);
  ws.emplace_back(t, 2 * inter, d);
  ws.emplace_back(t, d, 2 * inter);
  for (int e = 0; e < E; ++e) experts.push_back({&ws[size_t(3 * e)].w, &ws[size_t(3 * e + 1)].w, &ws[size_t(3 * e + 2)].w});
  const MlpWeightRefs shared{&ws[size_t(3 * E)].w, &ws[size_t(3 * E + 1)].w, &ws[size_t(3 * E + 2)].w};
  std::vector<int32_t> ids(size_t(m * k));
  std::vector<float> wts(size_t(m * k), 0.2f);
  std::mt19937 rng(3);
  for (int64_t r = 0; r < m; ++r)
    for (int j = 0; j < k; ++j) {
      int32_t e;
      bool dup;
      do {
        e = int32_t(rng() % E);
        dup = false;
        for (int i = 0; i < j; ++i) dup |= ids[size_t(r * k + i)] == e;
      } while (dup);
      ids[size_t(r * k + j)] = e;
    }
  const std::vector<float> x = activations(m * d);
  std::vector<float> y(size_t(m * d));
  for (auto _ : state)
    cpu::moe({x.data(), d, m, experts.data(), E, k, ids.data(), wts.data(), &shared, y.data(), d});
  const double flops = 2.0 * 3.0 * double(d) * double(inter) * double(m) * (k + 2);
  state.counters["GFLOPs"] = benchmark::Counter(flops * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Moe)
    ->ArgNames({"w", "m"})
    ->ArgsProduct({{0, 1, 2, 3, 4, 5, 6}, {1, 8, 32, 64, 128, 256}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace deepinfer
