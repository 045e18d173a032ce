// STREAM-like read bandwidth: all threads sum disjoint parts of a 2 GiB buffer (far beyond the
// caches), as a decode step reads weights. Reported as bytes_per_second.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace {

void BM_ReadBandwidth(benchmark::State& state) {
  const size_t n = (size_t(2) << 30) / sizeof(uint64_t);
  std::vector<uint64_t> buf(n);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) buf[i] = i;  // first touch by the reading thread
  uint64_t total = 0;
  for (auto _ : state) {
    uint64_t sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum)
    for (size_t i = 0; i < n; ++i) sum += buf[i];
    total += sum;
  }
  benchmark::DoNotOptimize(total);
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(n * sizeof(uint64_t)));
  state.counters["threads"] = omp_get_max_threads();
}
BENCHMARK(BM_ReadBandwidth)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

}  // namespace
