// STREAM-like read bandwidth: every thread sums its part of a 2 GiB buffer (far beyond the
// caches) as 4 concurrent contiguous streams, as the GEMV tiles read weights; the sum is
// integer, so the compiler vectorizes it freely. Reported as bytes_per_second.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdint>
#include <vector>

namespace {

uint64_t sum_streams(const uint64_t* p, size_t n) {  // 4 streams over the quarters of [p, p + n)
  const size_t q = n / 4;
  uint64_t a = 0, b = 0, c = 0, d = 0;
  for (size_t i = 0; i < q; ++i) {
    a += p[i];
    b += p[q + i];
    c += p[2 * q + i];
    d += p[3 * q + i];
  }
  return a + b + c + d;
}

void run(benchmark::State& state) {
  const size_t n = (size_t(2) << 30) / sizeof(uint64_t);
  std::vector<uint64_t> buf(n);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) buf[i] = i;  // first touch by the reading thread
  uint64_t total = 0;
  for (auto _ : state) {
    uint64_t sum = 0;
#pragma omp parallel reduction(+ : sum)
    {
      const size_t per = n / size_t(omp_get_num_threads());
      sum += sum_streams(buf.data() + per * size_t(omp_get_thread_num()), per);
    }
    total += sum;
  }
  benchmark::DoNotOptimize(total);
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(n * sizeof(uint64_t)));
  state.counters["threads"] = omp_get_max_threads();
}

void BM_ReadBandwidth(benchmark::State& state) { run(state); }
BENCHMARK(BM_ReadBandwidth)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
// Rated by the process's CPU time: on a shared machine, with OMP_NUM_THREADS=1, the bandwidth
// one core reaches while it runs (compare with model_bench's GB per CPU second).
void BM_ReadBandwidthPerCpuSecond(benchmark::State& state) { run(state); }
BENCHMARK(BM_ReadBandwidthPerCpuSecond)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->MinTime(2.0);

}  // namespace
