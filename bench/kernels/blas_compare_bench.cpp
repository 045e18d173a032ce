// Large bf16 GEMMs against OpenBLAS, one thread, rated by thread CPU time (robust on a shared
// machine): DeepInfer's linear on bf16 weights (f32 activations, weights widened in registers)
// vs cblas_sgemm on f32 copies of the weights (4 bytes per weight: what a library needs without
// native bf16 support; Debian's OpenBLAS is built without the bf16 sbgemm).
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>

#include <cstdint>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "kernels/cpu/gemm.h"

namespace deepinfer {
namespace {

struct Problem {
  int64_t m, n, k;
  std::vector<uint16_t> w_bf16;  // [n, k]
  std::vector<float> w_f32, x;   // [n, k], [m, k]
  std::vector<float> y;          // [m, n]
  Problem(int64_t m_, int64_t n_, int64_t k_) : m(m_), n(n_), k(k_) {
    std::mt19937 rng(1);
    std::normal_distribution<float> d(0.0f, 0.05f);
    for (int64_t i = 0; i < n * k; ++i) w_bf16.push_back(f32_to_bf16(d(rng)));
    for (uint16_t b : w_bf16) w_f32.push_back(bf16_to_f32(b));
    for (int64_t i = 0; i < m * k; ++i) x.push_back(d(rng));
    y.resize(size_t(m * n));
  }
  void rate(benchmark::State& s) const {
    s.counters["GFLOPs"] = benchmark::Counter(2.0 * double(m * n * k) * double(s.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
  }
};

void BM_DeepInferBf16(benchmark::State& s) {
  omp_set_num_threads(1);
  Problem p(s.range(0), 2816, 2048);
  LinearWeight w;
  w.dtype = DType::BF16;
  w.data = p.w_bf16.data();
  w.n_out = p.n;
  w.n_in = p.k;
  for (auto _ : s) cpu::linear({p.x.data(), p.k, p.m, &w, p.y.data(), p.n});
  p.rate(s);
}

void BM_OpenblasSgemmF32Weights(benchmark::State& s) {
  openblas_set_num_threads(1);
  Problem p(s.range(0), 2816, 2048);
  for (auto _ : s)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(p.m), int(p.n), int(p.k), 1.0f, p.x.data(), int(p.k),
                p.w_f32.data(), int(p.k), 0.0f, p.y.data(), int(p.n));
  p.rate(s);
}

BENCHMARK(BM_DeepInferBf16)->ArgName("m")->Arg(32)->Arg(256)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_OpenblasSgemmF32Weights)->ArgName("m")->Arg(32)->Arg(256)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace deepinfer
