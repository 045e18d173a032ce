// bf16 weights x bf16 activations on the top ISA levels the CPU runs, side by side in one run: amx
// (simd_amx.h; only where the CPU and OS offer AMX), avx512bf16-fma (bf16 products split into f32
// FMAs) and avx512bf16 (VDPBF16PS), all batch invariant. Prints, per level and case, the median of
// --reps interleaved repetitions, rated by process CPU time (robust on a shared machine) and by wall
// time:
// - the peaks the GEMM is measured against: register-only VDPBF16PS, f32 FMA (16 accumulators
//   each: more measured no faster) and, with AMX, TDPBF16PS loops, on one thread and on every
//   OpenMP thread;
// - GEMV at m = 1 over 1 GiB of weights in rotation (memory-bound: GB/s of weights);
// - linear (2816 x 2048) and SwiGLU (2 x 1408 x 2048) at m = 8 .. 512 (GFLOP/s);
// - the V2-Lite MoE layer (64 experts of 1408, top-6, 2 shared) at m = 1 .. 512 (ms);
// - with AMX, the share of the amx level's per-call weight-panel copy in a linear call (what
//   repacking the weights at load would save at most);
// - fp8 (e4m3, 128 x 128 scale blocks, and 32 x 32 as DeepSeek-V4.1's), int8 (I8_SM, a scale per row and 128 columns: the
//   requantized lm_head) and FP4 (e2m1, UE8M0 per 32) weights with bf16 activations
//   on every level, against bf16 on the top one: GEMV at m = 1, 2, 4, 6, 8, 16 (GB/s of stored
//   bytes, scales included, 1 GiB of them in rotation, next to a 4-stream read-bandwidth probe over
//   1 GiB) and linear 2816 x 2048 at m = 16 .. 512 (GFLOP/s); also bf16, fp8, int8 and FP4 relaid
//   tile-major (cpu::relay_weight) for the first level that relays them; and fp8 whose power-of-two
//   scales fold into the weights (LinearWeight::scales_fold, read by amx), stored and relaid, on
//   the first level. --lowbit runs only this part.
// Usage: gemm_levels_bench [--reps N] [--quick] [--lowbit]; OMP_NUM_THREADS sets the threads.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "core/aligned_vector.h"
#include "core/dtype.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/moe.h"
#include "kernels/cpu/simd_amx.h"

namespace deepinfer {
namespace {

double cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}
double wall_seconds() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// Normal-looking bf16 values (no denormals) from a cheap generator; n may be large.
void fill_bf16(uint16_t* p, int64_t n, uint32_t seed, float scale) {
  constexpr int64_t kBlock = 1 << 20;
  std::vector<uint16_t> block(size_t(std::min(n, kBlock)));
  uint32_t s = seed;
  for (uint16_t& v : block) {
    float sum = 0;
    for (int i = 0; i < 4; ++i) {
      s = s * 1664525u + 1013904223u;
      sum += float(s >> 8) * (1.0f / float(1 << 24)) - 0.5f;
    }
    v = f32_to_bf16(sum * scale);
  }
  for (int64_t i = 0; i < n; i += kBlock) std::memcpy(p + i, block.data(), size_t(std::min(kBlock, n - i)) * 2);
}

std::vector<float> activations(int64_t n, uint32_t seed) {
  std::vector<uint16_t> b(static_cast<size_t>(n));
  fill_bf16(b.data(), n, seed, 2.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) x[size_t(i)] = bf16_to_f32(b[size_t(i)]) + 1e-3f * float(i % 7);
  return x;
}

struct Level {
  const char* name;
  cpu::Isa isa;
};

// Matrices relaid (cpu::relay_weight) for the first of `levels` that relays them (its packed blocks
// run on weight tiles): tile-major, for `level`. Else stays empty.
struct RelaidCopies {
  std::vector<AlignedVector<uint8_t>> data;
  std::vector<LinearWeight> w;
  const Level* level = nullptr;
  void relay(const std::vector<LinearWeight>& from, const std::vector<Level>& levels) {
    const cpu::Isa saved = cpu::active_isa();
    for (const Level& l : levels) {
      cpu::set_active_isa(l.isa);
      for (const LinearWeight& lw : from) {
        const size_t bytes = cpu::relaid_bytes(lw);
        if (bytes == 0) break;
        w.push_back(cpu::relay_weight(lw, data.emplace_back(bytes).data()));
      }
      if (!w.empty()) {
        level = &l;
        break;
      }
    }
    cpu::set_active_isa(saved);
  }
};

struct Weights {  // `count` bf16 matrices [n_out, n_in] with bf16 activations
  std::vector<uint16_t> data;
  std::vector<LinearWeight> w;
  RelaidCopies relaid;  // relay_for
  void relay_for(const std::vector<Level>& levels) { relaid.relay(w, levels); }
  Weights(int count, int64_t n_out, int64_t n_in, uint32_t seed) : data(size_t(count * n_out * n_in)) {
    fill_bf16(data.data(), int64_t(data.size()), seed, 0.05f);
    for (int i = 0; i < count; ++i) {
      LinearWeight lw;
      lw.dtype = DType::BF16;
      lw.act_dtype = DType::BF16;
      lw.data = data.data() + size_t(i) * size_t(n_out * n_in);
      lw.n_out = n_out;
      lw.n_in = n_in;
      w.push_back(lw);
    }
  }
};

// `count` fp8 (128 x 128 blocks, DeepSeek-V3's and V4's; or fp8_block x fp8_block, 32 for V4.1's),
// int8 (I8_SM, the requantized lm_head's 1 x 128 blocks) or FP4 matrices [n_out, n_in] with bf16
// activations: random codes (no NaN), scales 2^-8 (fp8 with `fold`: scales_fold set).
struct LowBitWeights {
  std::vector<uint8_t> data, e8m0;
  std::vector<float> scale_inv;
  std::vector<LinearWeight> w;
  int64_t bytes_per_matrix = 0;  // stored bytes, scales included
  LowBitWeights(DType dtype, int count, int64_t n_out, int64_t n_in, uint32_t seed, int fp8_block = 128,
                bool fold = false) {
    const bool fp8 = has_block_scales(dtype), int8 = dtype == DType::I8_SM;
    const int64_t data_bytes = fp8 ? n_out * n_in : n_out * n_in / 2;
    const int64_t n_scales = int8 ? n_out * ((n_in + 127) / 128)
                             : fp8 ? (n_out + fp8_block - 1) / fp8_block * ((n_in + fp8_block - 1) / fp8_block)
                                   : n_out * n_in / 32;
    bytes_per_matrix = data_bytes + n_scales * (fp8 ? 4 : 1);
    data.resize(size_t(count * data_bytes));
    uint32_t s = seed;
    for (uint8_t& b : data) {
      s = s * 1664525u + 1013904223u;
      b = uint8_t(s >> 24);
      if (fp8 && !int8 && (b & 0x7f) == 0x7f) b = 0x3f;
    }
    if (fp8) scale_inv.assign(size_t(count * n_scales), 1.0f / 256);
    else e8m0.assign(size_t(count * n_scales), uint8_t(119));
    for (int i = 0; i < count; ++i) {
      LinearWeight lw;
      lw.dtype = dtype;
      lw.act_dtype = DType::BF16;
      lw.data = data.data() + size_t(i) * size_t(data_bytes);
      lw.n_out = n_out;
      lw.n_in = n_in;
      if (int8) lw.block_rows = 1;
      else if (fp8) lw.block_rows = lw.block_cols = fp8_block;
      if (fp8) lw.scale_inv = scale_inv.data() + size_t(i) * size_t(n_scales);
      else lw.scale_e8m0 = e8m0.data() + size_t(i) * size_t(n_scales);
      lw.scales_fold = fold && pow2_block_scales(lw);
      w.push_back(lw);
    }
  }
  RelaidCopies relaid;  // relay_for
  void relay_for(const std::vector<Level>& levels) { relaid.relay(w, levels); }
};

struct Timing {
  double cpu = 0, wall = 0;
};

// Runs f `iters` times; returns the seconds per call.
Timing time_calls(int iters, const std::function<void(int)>& f) {
  f(0);
  const double c0 = cpu_seconds(), w0 = wall_seconds();
  for (int i = 0; i < iters; ++i) f(i);
  return {(cpu_seconds() - c0) / iters, (wall_seconds() - w0) / iters};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Register-only loops: FLOP per CPU second of one thread, and per wall second on all threads. The
// accumulators are fully unrolled locals (kept in registers); the empty asm on one operand keeps the
// compiler from folding the loop.
__attribute__((target("avx512f,avx512bf16"))) double vdpbf16ps_loop(int64_t iters) {
  __m512 acc[16];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  __m512bh a = __m512bh(_mm512_set1_epi16(0x3f80));
  const __m512bh b = __m512bh(_mm512_set1_epi16(0x3c00));
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], a, b);
    asm volatile("" : "+v"(a));
  }
  float s = 0;
  for (__m512& c : acc) s += _mm512_reduce_add_ps(c);
  asm volatile("" ::"m"(s));
  return double(iters) * 16 * 16 * 2 * 2;
}

__attribute__((target("avx512f"))) double fma_loop(int64_t iters) {
  __m512 acc[16];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  __m512 a = _mm512_set1_ps(1.0f);
  const __m512 b = _mm512_set1_ps(0.0078125f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) acc[j] = _mm512_fmadd_ps(a, b, acc[j]);
    asm volatile("" : "+v"(a));
  }
  float s = 0;
  for (__m512& c : acc) s += _mm512_reduce_add_ps(c);
  asm volatile("" ::"m"(s));
  return double(iters) * 16 * 16 * 2;
}

__attribute__((target("amx-tile,amx-bf16"))) double tdpbf16ps_loop(int64_t iters) {
  static const cpu::amx::TileConfig cfg(16);
  _tile_loadconfig(&cfg);
  alignas(64) static uint16_t ones[512];
  std::fill(std::begin(ones), std::end(ones), uint16_t(0x3c00));
  _tile_loadd(4, ones, 64);
  _tile_loadd(5, ones, 64);
  _tile_loadd(6, ones, 64);
  _tile_loadd(7, ones, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_release();
  return double(iters) * 4 * 16 * 16 * 32 * 2;
}

void peak(const char* name, double (*loop)(int64_t), int64_t iters) {
  const double c0 = cpu_seconds();
  const double flop1 = loop(iters);
  const double one = flop1 / (cpu_seconds() - c0) / 1e9;
  double flop_all = 0;
  const double w0 = wall_seconds();
#pragma omp parallel reduction(+ : flop_all)
  flop_all += loop(iters);
  const double all = flop_all / (wall_seconds() - w0) / 1e9;
  std::printf("peak %-10s one thread %8.1f GFLOP/s per CPU second; %d threads %8.1f GFLOP/s wall\n", name, one,
              omp_get_max_threads(), all);
}

// Runs `body(level)` for each level, interleaved, `reps` times; prints medians of value(t).
void compare(const std::string& label, const std::vector<Level>& levels, int reps, const char* unit,
             const std::function<Timing(const Level&)>& body, const std::function<double(double)>& value) {
  std::vector<std::vector<double>> cpu(levels.size()), wall(levels.size());
  for (int r = 0; r < reps; ++r)
    for (size_t l = 0; l < levels.size(); ++l) {
      cpu::set_active_isa(levels[l].isa);
      const Timing t = body(levels[l]);
      cpu[l].push_back(value(t.cpu));
      wall[l].push_back(value(t.wall));
    }
  std::printf("%-34s", label.c_str());
  for (size_t l = 0; l < levels.size(); ++l)
    std::printf(" | %-10s %8.1f %s (cpu) %8.1f (wall)", levels[l].name, median(cpu[l]), unit, median(wall[l]));
  // Speedup of the first level over each other one, by CPU time (units per second, or ms per call).
  const bool rate = std::string(unit) != "ms";
  for (size_t l = 1; l < levels.size(); ++l)
    std::printf(" | %s / %s %.2fx (cpu)", levels[0].name, levels[l].name,
                rate ? median(cpu[0]) / median(cpu[l]) : median(cpu[l]) / median(cpu[0]));
  std::printf("\n");
  std::fflush(stdout);
}

// One weight format on one level.
struct Variant {
  const char* name;
  cpu::Isa isa;
  const std::vector<LinearWeight>* w;
  double bytes;  // stored bytes of one matrix
};

// Runs every variant interleaved `reps` times; prints the medians of value(variant, seconds per
// call) by CPU time, and each variant's ratio to the first.
void compare_variants(const std::string& label, const std::vector<Variant>& vs, int reps, const char* unit,
                      const std::function<Timing(const Variant&)>& body,
                      const std::function<double(const Variant&, double)>& value) {
  std::vector<std::vector<double>> cpu(vs.size());
  for (int r = 0; r < reps; ++r)
    for (size_t v = 0; v < vs.size(); ++v) {
      cpu::set_active_isa(vs[v].isa);
      cpu[v].push_back(value(vs[v], body(vs[v]).cpu));
    }
  std::printf("%s\n", label.c_str());
  for (size_t v = 0; v < vs.size(); ++v)
    std::printf("  %-22s %8.1f %s per CPU second  (%.2fx %s)\n", vs[v].name, median(cpu[v]), unit,
                median(cpu[v]) / median(cpu[0]), vs[0].name);
  std::fflush(stdout);
}

// 4 concurrent sequential streams over 1 GiB (read_bandwidth_bench's probe), GB per CPU second.
double read_probe_gbs() {
  const size_t n = (size_t(1) << 30) / sizeof(uint64_t), q = n / 4;
  std::vector<uint64_t> buf(n);
  for (size_t i = 0; i < n; ++i) buf[i] = i;
  uint64_t a = 0, b = 0, c = 0, d = 0;
  const double c0 = cpu_seconds();
  for (size_t i = 0; i < q; ++i) {
    a += buf[i];
    b += buf[q + i];
    c += buf[2 * q + i];
    d += buf[3 * q + i];
  }
  const double sec = cpu_seconds() - c0;
  const uint64_t sum = a + b + c + d;
  asm volatile("" ::"r"(sum));
  return double(n * sizeof(uint64_t)) / sec / 1e9;
}

// bf16 weights on the first level, then fp8, int8 and FP4 weights on every level.
// Folded fp8 (fp8f, fp8_32f) on the first level only, stored and relaid.
std::vector<Variant> lowbit_variants(const std::vector<Level>& levels, const Weights& bf16, const LowBitWeights& fp8,
                                     const LowBitWeights& fp8_32, const LowBitWeights& int8, const LowBitWeights& fp4,
                                     const LowBitWeights& fp8f, const LowBitWeights& fp8_32f, double bf16_bytes) {
  static std::vector<std::string> names;  // the Variants point into it
  names.clear();
  names.reserve(10 + 4 * levels.size());
  names.push_back(std::string("bf16 ") + levels[0].name);
  std::vector<Variant> vs = {{names.back().c_str(), levels[0].isa, &bf16.w, bf16_bytes}};
  if (!bf16.relaid.w.empty()) {
    names.push_back(std::string("bf16 ") + bf16.relaid.level->name + " tile-major");
    vs.push_back({names.back().c_str(), bf16.relaid.level->isa, &bf16.relaid.w, bf16_bytes});
  }
  for (const auto& [fmt, lw] : {std::pair<const char*, const LowBitWeights*>{"fp8 ", &fp8}, {"fp8 32x32 ", &fp8_32},
                                 {"int8 ", &int8}, {"fp4 ", &fp4}}) {
    for (const Level& l : levels) {
      names.push_back(fmt + std::string(l.name));
      vs.push_back({names.back().c_str(), l.isa, &lw->w, bf16_bytes > 0 ? double(lw->bytes_per_matrix) : 0});
    }
    if (!lw->relaid.w.empty()) {
      names.push_back(fmt + std::string(lw->relaid.level->name) + " tile-major");
      vs.push_back({names.back().c_str(), lw->relaid.level->isa, &lw->relaid.w, bf16_bytes > 0 ? double(lw->bytes_per_matrix) : 0});
    }
  }
  for (const auto& [fmt, lw] : {std::pair<const char*, const LowBitWeights*>{"fp8 folded ", &fp8f}, {"fp8 32x32 folded ", &fp8_32f}}) {
    const double bytes = bf16_bytes > 0 ? double(lw->bytes_per_matrix) : 0;
    names.push_back(fmt + std::string(levels[0].name));
    vs.push_back({names.back().c_str(), levels[0].isa, &lw->w, bytes});
    if (!lw->relaid.w.empty()) {
      names.push_back(fmt + std::string(lw->relaid.level->name) + " tile-major");
      vs.push_back({names.back().c_str(), lw->relaid.level->isa, &lw->relaid.w, bytes});
    }
  }
  return vs;
}

// fp8, int8 and FP4 weights with bf16 activations on every level, against bf16 on the first.
void lowbit_section(const std::vector<Level>& levels, int reps, bool quick) {
  for (auto [n_out, n_in] : {std::pair<int64_t, int64_t>{10944, 2048}, {2048, 10944}}) {
    const auto rotation = [&](double bytes) { return int((int64_t(1) << 30) / int64_t(bytes)); };
    Weights bf16(rotation(double(n_out * n_in * 2)), n_out, n_in, 7);
    LowBitWeights fp8(DType::F8_E4M3, rotation(double(n_out * n_in)), n_out, n_in, 9);
    LowBitWeights fp8_32(DType::F8_E4M3, rotation(double(n_out * n_in)), n_out, n_in, 9, 32);
    LowBitWeights int8(DType::I8_SM, rotation(double(n_out * n_in)), n_out, n_in, 10);
    LowBitWeights fp4(DType::F4_E2M1, rotation(double(n_out * n_in) * 17 / 32), n_out, n_in, 13);
    LowBitWeights fp8f(DType::F8_E4M3, rotation(double(n_out * n_in)), n_out, n_in, 9, 128, true);
    LowBitWeights fp8_32f(DType::F8_E4M3, rotation(double(n_out * n_in)), n_out, n_in, 9, 32, true);
    for (LowBitWeights* lw : {&fp8, &fp8_32, &int8, &fp4, &fp8f, &fp8_32f}) lw->relay_for(levels);
    bf16.relay_for(levels);
    const std::vector<Variant> vs =
        lowbit_variants(levels, bf16, fp8, fp8_32, int8, fp4, fp8f, fp8_32f, double(n_out * n_in * 2));
    std::vector<double> probe;
    for (int r = 0; r < reps; ++r) probe.push_back(read_probe_gbs());
    std::printf("read-bandwidth probe (4 streams, 1 GiB): %.1f GB/s per CPU second\n", median(probe));
    // Decode batch sizes: one pass of the weights per call.
    for (int64_t m : quick ? std::vector<int64_t>{1, 8} : std::vector<int64_t>{1, 2, 4, 6, 8, 16}) {
      const std::vector<float> x = activations(m * n_in, 3);
      std::vector<float> y(static_cast<size_t>(m * n_out));
      compare_variants("GEMV m=" + std::to_string(m) + " " + std::to_string(n_out) + "x" + std::to_string(n_in) +
                           " (stored bytes)",
                       vs, reps, "GB/s",
                       [&](const Variant& v) {
                         const int count = int(v.w->size());
                         return time_calls(count, [&](int i) {
                           cpu::linear({x.data(), n_in, m, &(*v.w)[size_t(i % count)], y.data(), n_out});
                         });
                       },
                       [&](const Variant& v, double sec) { return v.bytes / sec / 1e9; });
    }
  }
  const int64_t n_out = 2816, n_in = 2048;
  Weights bf16(1, n_out, n_in, 11);
  LowBitWeights fp8(DType::F8_E4M3, 1, n_out, n_in, 9), fp8_32(DType::F8_E4M3, 1, n_out, n_in, 9, 32),
      int8(DType::I8_SM, 1, n_out, n_in, 10), fp4(DType::F4_E2M1, 1, n_out, n_in, 13),
      fp8f(DType::F8_E4M3, 1, n_out, n_in, 9, 128, true), fp8_32f(DType::F8_E4M3, 1, n_out, n_in, 9, 32, true);
  for (LowBitWeights* lw : {&fp8, &fp8_32, &int8, &fp4, &fp8f, &fp8_32f}) lw->relay_for(levels);
  bf16.relay_for(levels);
  const std::vector<Variant> vs = lowbit_variants(levels, bf16, fp8, fp8_32, int8, fp4, fp8f, fp8_32f, 0);
  for (int64_t m : quick ? std::vector<int64_t>{8, 64, 256} : std::vector<int64_t>{8, 16, 64, 256, 512}) {
    const std::vector<float> x = activations(m * n_in, 5);
    std::vector<float> y(size_t(m * n_out));
    const int iters = int(std::max<int64_t>(3, 2048 / m));
    compare_variants("linear m=" + std::to_string(m) + " 2816x2048", vs, reps, "GFLOP/s",
                     [&](const Variant& v) {
                       return time_calls(iters, [&](int) { cpu::linear({x.data(), n_in, m, &(*v.w)[0], y.data(), n_out}); });
                     },
                     [&](const Variant&, double sec) { return 2.0 * double(m * n_out * n_in) / sec / 1e9; });
  }
}

int run(int argc, char** argv) {
  int reps = 5;
  bool quick = false, lowbit = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--quick") quick = true;
    else if (a == "--lowbit") lowbit = true;
    else {
      std::fprintf(stderr, "usage: gemm_levels_bench [--reps N] [--quick] [--lowbit]\n");
      return 2;
    }
  }
  std::vector<Level> levels;
  for (cpu::Isa isa : {cpu::Isa::kAmx, cpu::Isa::kAvx512Bf16Fma, cpu::Isa::kAvx512Bf16})
    if (cpu::cpu_runs(isa)) levels.push_back({isa == cpu::Isa::kAmx ? "amx" : isa == cpu::Isa::kAvx512Bf16 ? "avx512bf16" : "avx512bf16-fma", isa});
  if (levels.empty()) {
    std::fprintf(stderr, "this CPU offers no AVX-512 BF16: best level %s\n",
                 std::string(cpu::isa_name(cpu::best_supported_isa())).c_str());
    return 1;
  }
  const bool amx = levels[0].isa == cpu::Isa::kAmx;
  std::printf("threads %d, reps %d (medians)\n", omp_get_max_threads(), reps);
  if (lowbit) {
    lowbit_section(levels, reps, quick);
    return 0;
  }
  peak("VDPBF16PS", &vdpbf16ps_loop, quick ? 2000000 : 20000000);
  peak("FMA f32", &fma_loop, quick ? 2000000 : 20000000);
  if (amx) peak("TDPBF16PS", &tdpbf16ps_loop, quick ? 200000 : 2000000);

  // GEMV: 1 GiB of weights in rotation.
  for (auto [n_out, n_in] : {std::pair<int64_t, int64_t>{10944, 2048}, {2048, 10944}}) {
    const int count = int((int64_t(1) << 30) / (n_out * n_in * 2));
    Weights ws(count, n_out, n_in, 7);
    const std::vector<float> x = activations(n_in, 3);
    std::vector<float> y(static_cast<size_t>(n_out));
    compare("GEMV m=1 " + std::to_string(n_out) + "x" + std::to_string(n_in), levels, reps, "GB/s",
            [&](const Level&) {
              return time_calls(count, [&](int i) { cpu::linear({x.data(), n_in, 1, &ws.w[size_t(i % count)], y.data(), n_out}); });
            },
            [&](double s) { return double(n_out * n_in * 2) / s / 1e9; });
  }

  // GEMM and SwiGLU.
  const std::vector<int64_t> ms = quick ? std::vector<int64_t>{8, 64, 256} : std::vector<int64_t>{8, 16, 32, 64, 128, 256, 512};
  {
    const int64_t n_out = 2816, n_in = 2048;
    Weights ws(1, n_out, n_in, 11);
    for (int64_t m : ms) {
      const std::vector<float> x = activations(m * n_in, 5);
      std::vector<float> y(size_t(m * n_out));
      const int iters = int(std::max<int64_t>(3, 4096 / m));
      compare("linear m=" + std::to_string(m) + " 2816x2048", levels, reps, "GFLOP/s",
              [&](const Level&) { return time_calls(iters, [&](int) { cpu::linear({x.data(), n_in, m, &ws.w[0], y.data(), n_out}); }); },
              [&](double s) { return 2.0 * double(m * n_out * n_in) / s / 1e9; });
    }
  }
  {
    const int64_t inter = 1408, n_in = 2048;
    Weights gate(1, inter, n_in, 13), up(1, inter, n_in, 17);
    for (int64_t m : ms) {
      const std::vector<float> x = activations(m * n_in, 5);
      std::vector<float> y(size_t(m * inter));
      const int iters = int(std::max<int64_t>(3, 4096 / m));
      compare("swiglu m=" + std::to_string(m) + " 2x1408x2048", levels, reps, "GFLOP/s",
              [&](const Level&) {
                return time_calls(iters, [&](int) { cpu::swiglu({x.data(), n_in, m, &gate.w[0], &up.w[0], y.data(), inter}); });
              },
              [&](double s) { return 4.0 * double(m * inter * n_in) / s / 1e9; });
    }
  }

  // The MoE layer: gate/up/down of 64 experts + one shared expert of twice the width.
  {
    const int64_t d = 2048, inter = 1408;
    const int E = 64, k = 6;
    Weights gu(2 * E, inter, d, 19), down(E, d, inter, 23), sgu(2, 2 * inter, d, 29), sdown(1, d, 2 * inter, 31);
    std::vector<MlpWeightRefs> experts;
    for (int e = 0; e < E; ++e) experts.push_back({&gu.w[size_t(2 * e)], &gu.w[size_t(2 * e + 1)], &down.w[size_t(e)]});
    const MlpWeightRefs shared{&sgu.w[0], &sgu.w[1], &sdown.w[0]};
    for (int64_t m : quick ? std::vector<int64_t>{1, 32, 256} : std::vector<int64_t>{1, 8, 32, 128, 512}) {
      std::vector<int32_t> ids(size_t(m * k));
      std::vector<float> wts(size_t(m * k), 0.2f);
      uint32_t s = 3;
      for (int64_t r = 0; r < m; ++r)
        for (int j = 0; j < k; ++j) {
          int32_t e;
          bool dup;
          do {
            s = s * 1664525u + 1013904223u;
            e = int32_t((s >> 8) % E);
            dup = false;
            for (int i = 0; i < j; ++i) dup |= ids[size_t(r * k + i)] == e;
          } while (dup);
          ids[size_t(r * k + j)] = e;
        }
      const std::vector<float> x = activations(m * d, 5);
      std::vector<float> y(size_t(m * d));
      const int iters = int(std::max<int64_t>(2, 256 / m));
      compare("moe m=" + std::to_string(m) + " (64x1408, top-6 + 2)", levels, reps, "ms",
              [&](const Level&) {
                return time_calls(iters, [&](int) { cpu::moe({x.data(), d, m, experts.data(), E, k, ids.data(), wts.data(), &shared, y.data(), d}); });
              },
              [&](double sec) { return sec * 1e3; });
    }
  }

  // The per-call panel copy against a whole linear call (one thread's view: CPU time).
  if (amx) {
    const int64_t n_out = 2816, n_in = 2048;
    Weights ws(1, n_out, n_in, 11);
    std::vector<uint16_t> panels(size_t((n_out + 15) / 16 * ((n_in + 31) / 32) * cpu::amx::kPanelStride + 32));
    uint16_t* p = reinterpret_cast<uint16_t*>((reinterpret_cast<uintptr_t>(panels.data()) + 63) & ~uintptr_t(63));
    std::vector<double> copy_s;
    for (int r = 0; r < reps; ++r)
      copy_s.push_back(time_calls(20, [&](int) { cpu::amx::copy_panels(ws.w[0], false, 0, n_out, p); }).cpu);
    cpu::set_active_isa(cpu::Isa::kAmx);
    for (int64_t m : {64, 256}) {
      const std::vector<float> x = activations(m * n_in, 5);
      std::vector<float> y(size_t(m * n_out));
      std::vector<double> call_s;
      for (int r = 0; r < reps; ++r)
        call_s.push_back(time_calls(int(4096 / m), [&](int) { cpu::linear({x.data(), n_in, m, &ws.w[0], y.data(), n_out}); }).cpu);
      std::printf("panel copy of 2816x2048 (weights from memory): %.1f us CPU; linear m=%ld: %.1f us CPU: the copy is %.0f %%\n",
                  median(copy_s) * 1e6, long(m), median(call_s) * 1e6, 100.0 * median(copy_s) / median(call_s));
    }
  }
  return 0;
}

}  // namespace
}  // namespace deepinfer

int main(int argc, char** argv) { return deepinfer::run(argc, argv); }
