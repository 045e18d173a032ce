// Shared pieces of the kernel tests: random weights of every stored dtype, a plain scalar
// reference (double accumulation over dequantized weights), the ISAs this CPU can run, and the
// bitwise per-row batch-invariance check.
#pragma once

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/aligned_vector.h"
#include "core/dtype.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/moe.h"
#include "kernels/cpu/vec.h"
#include "kernels/ops.h"

namespace deepinfer::test {

inline constexpr cpu::Isa kAllIsas[] = {cpu::Isa::kPortable,   cpu::Isa::kAvx2,          cpu::Isa::kAvx512,
                                         cpu::Isa::kAvx512Bf16, cpu::Isa::kAvx512Bf16Fma, cpu::Isa::kAmx};

inline std::vector<cpu::Isa> supported_isas() {
  std::vector<cpu::Isa> out;
  for (cpu::Isa isa : kAllIsas)
    if (cpu::cpu_runs(isa)) out.push_back(isa);
  return out;
}

// The ISA's name as a test-name part (letters, digits and '_').
inline std::string isa_test_name(cpu::Isa isa) {
  std::string name(cpu::isa_name(isa));
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

// Sets the ISA for the scope, restoring the previous one after.
struct IsaScope {
  cpu::Isa saved = cpu::active_isa();
  explicit IsaScope(cpu::Isa isa) { cpu::set_active_isa(isa); }
  ~IsaScope() { cpu::set_active_isa(saved); }
};

// Fixture of the amx level's tests: skipped where the CPU or OS offers no AMX, else run with the
// amx level active.
class AmxLevelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cpu::best_supported_isa() < cpu::Isa::kAmx) GTEST_SKIP() << "no AMX on this CPU (or not granted by the OS)";
  }
  IsaScope scope{cpu::best_supported_isa() >= cpu::Isa::kAmx ? cpu::Isa::kAmx : cpu::active_isa()};
};

struct ThreadScope {
  int saved = omp_get_max_threads();
  explicit ThreadScope(int n) { omp_set_num_threads(n); }
  ~ThreadScope() { omp_set_num_threads(saved); }
};

// Bitwise per-row batch invariance: op(r0, m, out) computes rows [r0, r0 + m) into out
// ([m, n_out]); all m rows on two threads must equal each row alone on one thread.
template <typename Op>
void expect_rows_invariant(int64_t m, int64_t n_out, Op op) {
  std::vector<float> batch(size_t(m * n_out));
  {
    ThreadScope t(2);
    op(0, m, batch.data());
  }
  ThreadScope t(1);
  for (int64_t r = 0; r < m; ++r) {
    std::vector<float> alone(static_cast<size_t>(n_out));
    op(r, 1, alone.data());
    ASSERT_EQ(std::memcmp(alone.data(), batch.data() + r * n_out, size_t(n_out) * 4), 0) << "row " << r;
  }
}

// op(r0, m, out) computes rows [r0, r0 + m) into out ([m, n_out]). Each row alone (one thread) is
// the reference; every batch [0, m), m = 1..kMaxRows, must reproduce it bitwise, odd m on one
// thread and even m on two (the amx level's tests: every batch size meets every tile shape).
inline constexpr int64_t kMaxRows = 300;
template <class Op>
void expect_every_batch_size_invariant(int64_t n_out, Op op) {
  std::vector<float> alone(size_t(kMaxRows * n_out));
  {
    ThreadScope t(1);
    for (int64_t r = 0; r < kMaxRows; ++r) op(r, 1, alone.data() + r * n_out);
  }
  std::vector<float> batch(size_t(kMaxRows * n_out));
  for (int64_t m = 1; m <= kMaxRows; ++m) {
    ThreadScope t(m % 2 == 0 ? 2 : 1);
    op(0, m, batch.data());
    for (int64_t r = 0; r < m; ++r)
      ASSERT_EQ(std::memcmp(batch.data() + r * n_out, alone.data() + r * n_out, size_t(n_out) * 4), 0)
          << "m " << m << ", row " << r;
  }
}

inline void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b, const char* what = "") {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(std::memcmp(&a[i], &b[i], 4), 0) << what << " element " << i << ": " << a[i] << " vs " << b[i];
}

inline std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// The same weights in two layouts (stored and relaid, say) give the same bits: linear of w and of t
// for every m in batches, on one and two threads (inputs n_in + 5 apart).
inline void expect_linear_alike(const LinearWeight& w, const LinearWeight& t, const std::vector<int64_t>& batches) {
  const int64_t ldx = w.n_in + 5, n_out = w.n_out;
  const std::vector<float> x = random_floats(size_t(batches.back() * ldx), 11);
  for (int threads : {1, 2}) {
    const ThreadScope scope(threads);
    for (int64_t m : batches) {
      std::vector<float> a(size_t(m * n_out)), b(size_t(m * n_out));
      cpu::linear({x.data(), ldx, m, &w, a.data(), n_out});
      cpu::linear({x.data(), ldx, m, &t, b.data(), n_out});
      SCOPED_TRACE("m " + std::to_string(m) + ", threads " + std::to_string(threads));
      expect_same_bits(a, b);
    }
  }
}

// SwiGLU of (gate, up) and of (g, u) give the same bits for every m in batches.
inline void expect_swiglu_alike(const LinearWeight& gate, const LinearWeight& up, const LinearWeight& g,
                                const LinearWeight& u, const std::vector<int64_t>& batches) {
  const int64_t n_in = gate.n_in, inter = gate.n_out;
  const std::vector<float> x = random_floats(size_t(batches.back() * n_in), 5);
  for (int64_t m : batches) {
    std::vector<float> a(size_t(m * inter)), b(size_t(m * inter));
    cpu::swiglu({x.data(), n_in, m, &gate, &up, a.data(), inter});
    cpu::swiglu({x.data(), n_in, m, &g, &u, b.data(), inter});
    SCOPED_TRACE("SwiGLU, m " + std::to_string(m));
    expect_same_bits(a, b);
  }
}

// MoE over experts a (routed, then the shared expert last) and over b give the same bits for
// every m in batches: each row routed to two experts, the second varying with the row.
inline void expect_moe_alike(const std::vector<MlpWeightRefs>& a, const std::vector<MlpWeightRefs>& b,
                             const std::vector<int64_t>& batches) {
  const int E = int(a.size()) - 1, k = 2;
  const int64_t d = a[0].gate->n_in, rows = batches.back();
  std::vector<int32_t> ids(size_t(rows * k));
  std::vector<float> wts(size_t(rows * k), 0.5f);
  for (int64_t r = 0; r < rows; ++r) {
    ids[size_t(r * k)] = int32_t(r % E);
    ids[size_t(r * k + 1)] = int32_t((r % E + 1 + (r / E) % (E - 1)) % E);
  }
  const std::vector<float> x = random_floats(size_t(rows * d), 9);
  for (int64_t m : batches) {
    std::vector<float> ya(size_t(m * d)), yb(size_t(m * d));
    cpu::moe({x.data(), d, m, a.data(), E, k, ids.data(), wts.data(), &a[size_t(E)], ya.data(), d});
    cpu::moe({x.data(), d, m, b.data(), E, k, ids.data(), wts.data(), &b[size_t(E)], yb.data(), d});
    SCOPED_TRACE("MoE, m " + std::to_string(m));
    expect_same_bits(ya, yb);
  }
}

// MoE over rows [0, kMaxRows) of d random inputs, each routed to two of the E experts (the
// second one varying with the row) and the shared expert: every batch size must give each row
// the bits it gets alone.
inline void expect_moe_invariant_for_every_batch_size(int64_t d, const MlpWeightRefs* experts, int E,
                                                      const MlpWeightRefs* shared) {
  constexpr int k = 2;
  std::vector<int32_t> ids(size_t(kMaxRows * k));
  std::vector<float> wts(size_t(kMaxRows * k));
  for (int64_t r = 0; r < kMaxRows; ++r) {
    ids[size_t(r * k)] = int32_t(r % E);
    ids[size_t(r * k + 1)] = int32_t((r % E + 1 + (r / E) % (E - 1)) % E);  // another expert
    wts[size_t(r * k)] = 0.25f + 0.01f * float(r % 5);
    wts[size_t(r * k + 1)] = 0.5f;
  }
  const std::vector<float> x = random_floats(size_t(kMaxRows * d), 9);
  expect_every_batch_size_invariant(d, [&](int64_t r0, int64_t m, float* out) {
    cpu::moe({x.data() + r0 * d, d, m, experts, E, k, ids.data() + r0 * k, wts.data() + r0 * k, shared, out, d});
  });
}

// A weight of the given dtype with random values; owns its storage.
struct TestWeight {
  LinearWeight w;
  std::vector<uint8_t> bytes;
  std::vector<float> scales;

  // fp8 and int8 (I8_SM): `block_rows` (by default `block`) x `block` scale blocks.
  TestWeight(DType dtype, int64_t n_out, int64_t n_in, uint32_t seed, int block = 128, int block_rows = 0) {
    w.dtype = dtype;
    w.block_cols = block;
    w.block_rows = block_rows > 0 ? block_rows : block;
    w.n_out = n_out;
    w.n_in = n_in;
    const std::vector<float> vals = random_floats(size_t(n_out * n_in), seed, 1.0f / std::sqrt(float(n_in)));
    bytes.resize(size_t(n_out * n_in) * dtype_size(dtype));
    std::mt19937 rng(seed + 1);
    for (size_t i = 0; i < vals.size(); ++i) {
      switch (dtype) {
        case DType::F32: reinterpret_cast<float*>(bytes.data())[i] = vals[i]; break;
        case DType::BF16: reinterpret_cast<uint16_t*>(bytes.data())[i] = f32_to_bf16(vals[i]); break;
        case DType::F16: {  // random finite halves of magnitude below 2
          uint16_t h = uint16_t(rng() & 0xbfff);
          reinterpret_cast<uint16_t*>(bytes.data())[i] = h;
          break;
        }
        case DType::F8_E4M3: {
          uint8_t b = uint8_t(rng());
          if ((b & 0x7f) == 0x7f) b &= 0xfe;  // no NaN codes
          bytes[i] = b;
          break;
        }
        case DType::I8_SM: bytes[i] = uint8_t(rng()); break;  // every byte is a code (0x80: -0)
        default:
          ADD_FAILURE() << "not a weight dtype of the kernels: " << dtype_name(dtype);
      }
    }
    w.data = bytes.data();
    if (has_block_scales(dtype)) {
      const int64_t sr = (n_out + w.block_rows - 1) / w.block_rows, sc = (n_in + w.block_cols - 1) / w.block_cols;
      scales = random_floats(size_t(sr * sc), seed + 2, 1e-3f);
      for (float& s : scales) s = std::fabs(s) + 1e-4f;
      w.scale_inv = scales.data();
    }
  }
  TestWeight(const TestWeight&) = delete;
};

// E routed experts [inter, d] x 2 and [d, inter] and a shared expert twice as wide, made by
// make(n_out, n_in, seed) -> std::unique_ptr<TestWeight>, and every weight relaid by
// relay(const LinearWeight&, AlignedVector<uint8_t>& buf) -> LinearWeight: the two expert sets
// that expect_moe_alike compares.
struct ExpertsTwice {
  std::vector<std::unique_ptr<TestWeight>> ws;
  std::deque<AlignedVector<uint8_t>> bufs;
  std::deque<LinearWeight> relaid_ws;
  std::vector<MlpWeightRefs> stored, relaid;

  template <class Make, class Relay>
  ExpertsTwice(int E, int64_t d, int64_t inter, Make make, Relay relay) {
    for (int e = 0; e <= E; ++e) {  // the last is the shared expert
      const int64_t width = e == E ? 2 * inter : inter;
      for (auto [n_out, n_in] : {std::pair{width, d}, std::pair{width, d}, std::pair{d, width}}) {
        ws.push_back(make(n_out, n_in, 100 + uint32_t(ws.size())));
        relaid_ws.push_back(relay(ws.back()->w, bufs.emplace_back()));
      }
      const size_t n = ws.size();
      stored.push_back({&ws[n - 3]->w, &ws[n - 2]->w, &ws[n - 1]->w});
      relaid.push_back({&relaid_ws[n - 3], &relaid_ws[n - 2], &relaid_ws[n - 1]});
    }
  }
};

// Row `o` of W as f32.
inline std::vector<float> weight_row(const LinearWeight& w, int64_t o) {
  std::vector<float> row(size_t(w.n_in));
  cpu::dequant_row(w, o, row.data());
  return row;
}

// x rounded to bf16 and back, as kernels see activations for weights with act_dtype BF16.
inline std::vector<float> bf16_rounded(const float* x, size_t n) {
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = bf16_to_f32(f32_to_bf16(x[i]));
  return out;
}

// An fp8 MLA cache's bytes as the bf16 cache (same slots) whose entries hold each latent
// dequantized and rounded to bf16 (bf16 of the f32 product code * scale, per kFp8GroupSize
// values) and the rope part as stored: what MlaAttentionParams' BF16 dots read an fp8 cache as.
inline std::vector<uint8_t> fp8_cache_as_bf16(const std::vector<uint8_t>& cache, const MlaCacheLayout& fp8) {
  const int c = fp8.kv_lora_rank, r = fp8.qk_rope_head_dim, g = MlaCacheLayout::kFp8GroupSize;
  const MlaCacheLayout bf16{DType::BF16, c, r};
  const size_t slots = cache.size() / fp8.bytes_per_token();
  std::vector<uint8_t> out(slots * bf16.bytes_per_token());
  for (size_t i = 0; i < slots; ++i) {
    const uint8_t* e = cache.data() + i * fp8.bytes_per_token();
    std::vector<float> scales(size_t((c + g - 1) / g));
    std::memcpy(scales.data(), e + c, scales.size() * 4);
    std::vector<uint16_t> entry(size_t(c + r));
    for (int j = 0; j < c; ++j) entry[size_t(j)] = f32_to_bf16(fp8_e4m3_to_f32(e[j]) * scales[size_t(j / g)]);
    std::memcpy(entry.data() + c, e + c + scales.size() * 4, size_t(r) * 2);
    std::memcpy(out.data() + i * bf16.bytes_per_token(), entry.data(), entry.size() * 2);
  }
  return out;
}

inline double ref_dot(const float* x, const std::vector<float>& w) {
  double acc = 0;
  for (size_t i = 0; i < w.size(); ++i) acc += double(x[i]) * double(w[i]);
  return acc;
}

// |got - want| within a relative tolerance of the magnitude `scale` of the terms summed.
inline bool near(double got, double want, double scale, double rel = 2e-5) {
  return std::fabs(got - want) <= rel * (scale + std::fabs(want)) + 1e-6;
}

}  // namespace deepinfer::test
