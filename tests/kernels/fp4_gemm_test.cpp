// FP4 (F4_E2M1, UE8M0 scale per 32 inputs) weights in the linear, SwiGLU and MoE kernels, per ISA,
// f32 and bf16 activations: bitwise equal to the same weights expanded to bf16 (each value times
// its scale, exact) through the bf16 kernels, against a double reference, every nibble code at every
// scale exponent, and bitwise per-row batch invariance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <tuple>

#include "kernel_test_util.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/moe.h"

namespace deepinfer::test {
namespace {

// W[i, j] = E2M1(nibble) * 2^(e - 127), the exact value (double: no rounding anywhere).
double fp4_value(int nibble, int e) { return double(kE2M1ToF32[nibble]) * std::ldexp(1.0, e - 127); }

// A packed FP4 weight and its bf16 expansion (f32_to_bf16 of the f32 product, as a loader that
// expands would make it).
struct Fp4Weight {
  LinearWeight w, bf16;
  std::vector<uint8_t> packed, scales;
  std::vector<uint16_t> expanded;

  // Random nibbles (every code, signed zeros included) and scale bytes in [e_lo, e_hi].
  Fp4Weight(int64_t n_out, int64_t n_in, uint32_t seed, int e_lo = 118, int e_hi = 126)
      : packed(size_t(n_out * n_in / 2)), scales(size_t(n_out * n_in / 32)) {
    std::mt19937 rng(seed);
    for (uint8_t& b : packed) b = uint8_t(rng());
    for (uint8_t& s : scales) s = uint8_t(e_lo + int(rng() % uint32_t(e_hi - e_lo + 1)));
    bind(n_out, n_in);
  }
  Fp4Weight(int64_t n_out, int64_t n_in, std::vector<uint8_t> p, std::vector<uint8_t> s)
      : packed(std::move(p)), scales(std::move(s)) {
    bind(n_out, n_in);
  }
  void set_act(DType act) { w.act_dtype = bf16.act_dtype = act; }

 private:
  void bind(int64_t n_out, int64_t n_in) {
    w.dtype = DType::F4_E2M1;
    w.data = packed.data();
    w.scale_e8m0 = scales.data();
    w.n_out = bf16.n_out = n_out;
    w.n_in = bf16.n_in = n_in;
    expanded.resize(size_t(n_out * n_in));
    for (int64_t i = 0; i < n_out; ++i)
      for (int64_t j = 0; j < n_in; ++j) {
        const uint8_t* row = packed.data() + i * n_in / 2;
        const float s = ue8m0_to_f32(scales[size_t(i * n_in / 32 + j / 32)]);
        expanded[size_t(i * n_in + j)] = f32_to_bf16(fp4_e2m1_at(row, j) * s);
      }
    bf16.dtype = DType::BF16;
    bf16.data = expanded.data();
  }
};

class Fp4Gemm : public ::testing::TestWithParam<std::tuple<cpu::Isa, DType>> {
 protected:
  void SetUp() override {
    if (!cpu::cpu_runs(isa())) GTEST_SKIP() << "ISA not on this CPU";
  }
  cpu::Isa isa() const { return std::get<0>(GetParam()); }
  DType act() const { return std::get<1>(GetParam()); }
  // Where the expanded bf16 weights take the same path: the same ISA (on AMX with bf16
  // activations both run on tiles, the FP4 panels widened with their scales).
  cpu::Isa expanded_isa() const { return isa(); }
};

// Shapes: one block per row, 64 and 33 blocks; m 1-16 widen in registers (passes of 4 rows at
// most: 5 = 3 + 2, 7 = 4 + 3, 16 = 4 x 4), m 17 through a scratch, m 29 takes two passes of rows
// (24 through a scratch, then 5 in registers): every tile shape and the one-row paths.
TEST_P(Fp4Gemm, LinearEqualsExpandedBf16AndReferenceAndIsBatchInvariant) {
  IsaScope scope(isa());
  for (auto [n_out, n_in] : {std::pair<int64_t, int64_t>{37, 32}, {64, 2048}, {130, 1056}}) {
    Fp4Weight fw(n_out, n_in, 7);
    fw.set_act(act());
    for (int64_t m : {1, 3, 5, 7, 8, 16, 17, 29}) {
      const int64_t ldx = n_in + 5;
      const std::vector<float> x = random_floats(size_t(m * ldx), 11 + uint32_t(m));
      std::vector<float> y(size_t(m * n_out)), y_bf16(size_t(m * n_out));
      cpu::linear({x.data(), ldx, m, &fw.w, y.data(), n_out});
      {
        IsaScope expanded(expanded_isa());
        cpu::linear({x.data(), ldx, m, &fw.bf16, y_bf16.data(), n_out});
      }
      expect_same_bits(y, y_bf16, "FP4 against expanded bf16");
      for (int64_t r = 0; r < m; ++r) {
        const std::vector<float> xr = act() == DType::BF16 ? bf16_rounded(x.data() + r * ldx, size_t(n_in))
                                                           : std::vector<float>(x.data() + r * ldx, x.data() + r * ldx + n_in);
        for (int64_t o = 0; o < n_out; ++o) {
          double want = 0, scale = 0;
          for (int64_t j = 0; j < n_in; ++j) {
            const uint8_t b = fw.packed[size_t((o * n_in + j) / 2)];
            const double p = double(xr[size_t(j)]) *
                             fp4_value(j % 2 ? b >> 4 : b & 15, fw.scales[size_t(o * n_in / 32 + j / 32)]);
            want += p;
            scale += std::fabs(p);
          }
          ASSERT_TRUE(near(y[size_t(r * n_out + o)], want, scale)) << "r " << r << " o " << o;
        }
      }
    }
    const int64_t m = 29;
    const std::vector<float> x = random_floats(size_t(m * n_in), 5);
    expect_rows_invariant(m, n_out, [&](int64_t r0, int64_t mm, float* out) {
      cpu::linear({x.data() + r0 * n_in, n_in, mm, &fw.w, out, n_out});
    });
  }
}

TEST_P(Fp4Gemm, SwigluEqualsExpandedBf16AndIsBatchInvariant) {
  IsaScope scope(isa());
  const int64_t inter = 45, n_in = 320, m = 29;
  Fp4Weight gate(inter, n_in, 3), up(inter, n_in, 4);
  gate.set_act(act());
  up.set_act(act());
  const std::vector<float> x = random_floats(size_t(m * n_in), 9);
  std::vector<float> y(size_t(m * inter)), y_bf16(size_t(m * inter));
  cpu::swiglu({x.data(), n_in, m, &gate.w, &up.w, y.data(), inter});
  {
    IsaScope expanded(expanded_isa());
    cpu::swiglu({x.data(), n_in, m, &gate.bf16, &up.bf16, y_bf16.data(), inter});
  }
  expect_same_bits(y, y_bf16, "FP4 SwiGLU against expanded bf16");
  expect_rows_invariant(m, inter, [&](int64_t r0, int64_t mm, float* out) {
    cpu::swiglu({x.data() + r0 * n_in, n_in, mm, &gate.w, &up.w, out, inter});
  });
}

// For every scale byte e (0..254: denormal, overflowing and every normal power of two), row c of
// a 16 x 32 weight holds code c at element 5 (zeros elsewhere) and the input is one-hot there, so
// y[c] = E2M1(c) * 2^(e - 127) rounded to f32 (an overflow is infinite); bf16 activations on
// VDPBF16PS or AMX tiles read a denormal weight as zero, as they read the expanded one (the FMAs of
// avx512bf16-fma keep it).
TEST_P(Fp4Gemm, EveryCodeAtEveryScaleExponent) {
  IsaScope scope(isa());
  const int64_t n_in = 32, n_out = 16, m = 3;
  const bool daz = act() == DType::BF16 && (isa() == cpu::Isa::kAvx512Bf16 || isa() == cpu::Isa::kAmx);
  std::vector<float> x(size_t(m * n_in), 0.0f);
  for (int64_t r = 0; r < m; ++r) x[size_t(r * n_in + 5)] = 1.0f;
  for (int e = 0; e < 255; ++e) {
    std::vector<uint8_t> packed(size_t(n_out * n_in / 2), 0), scales(static_cast<size_t>(n_out), static_cast<uint8_t>(e));
    for (int c = 0; c < 16; ++c) packed[size_t(c * n_in / 2 + 2)] = uint8_t(c << 4);  // element 5: byte 2, high nibble
    Fp4Weight fw(n_out, n_in, packed, scales);
    fw.set_act(act());
    std::vector<float> y(size_t(m * n_out)), y_bf16(size_t(m * n_out));
    cpu::linear({x.data(), n_in, m, &fw.w, y.data(), n_out});
    {
      IsaScope expanded(expanded_isa());
      cpu::linear({x.data(), n_in, m, &fw.bf16, y_bf16.data(), n_out});
    }
    expect_same_bits(y, y_bf16, "one-hot FP4 against expanded bf16");
    for (int64_t r = 0; r < m; ++r)
      for (int c = 0; c < 16; ++c) {
        const double v = fp4_value(c, e);
        const bool denormal = v != 0 && std::fabs(v) < double(std::numeric_limits<float>::min());
        const float want = daz && denormal ? 0.0f : float(v);  // float(v): exact, or infinite
        ASSERT_EQ(y[size_t(r * n_out + c)], want) << "code " << c << " scale byte " << e;
      }
  }
}

// A routed MoE with FP4 experts (and an FP4 shared expert) equals the same experts expanded to bf16.
TEST_P(Fp4Gemm, MoeEqualsExpandedBf16AndIsBatchInvariant) {
  IsaScope scope(isa());
  const int64_t d = 96, inter = 64, m = 21;
  const int E = 6, k = 2;
  std::vector<std::unique_ptr<Fp4Weight>> ws;
  std::vector<MlpWeightRefs> fp4, bf16;
  auto add = [&](uint32_t seed, int64_t width) {
    for (auto [o, i] : {std::pair{width, d}, std::pair{width, d}, std::pair{d, width}}) {
      ws.push_back(std::make_unique<Fp4Weight>(o, i, seed++));
      ws.back()->set_act(act());
    }
    const size_t n = ws.size();
    fp4.push_back({&ws[n - 3]->w, &ws[n - 2]->w, &ws[n - 1]->w});
    bf16.push_back({&ws[n - 3]->bf16, &ws[n - 2]->bf16, &ws[n - 1]->bf16});
  };
  for (int e = 0; e <= E; ++e) add(100 + 7 * uint32_t(e), e == E ? 2 * inter : inter);  // the last: shared
  const std::vector<float> x = random_floats(size_t(m * d), 1);
  std::vector<int32_t> ids(size_t(m * k));
  std::vector<float> wts(size_t(m * k));
  std::mt19937 rng(3);
  for (int64_t r = 0; r < m; ++r) {
    std::vector<int32_t> all(E);
    for (int e = 0; e < E; ++e) all[size_t(e)] = e;
    std::shuffle(all.begin(), all.end(), rng);
    for (int j = 0; j < k; ++j) {
      ids[size_t(r * k + j)] = all[size_t(j)];
      wts[size_t(r * k + j)] = 0.2f + 0.3f * float(j);
    }
  }
  auto run = [&](const std::vector<MlpWeightRefs>& refs, int64_t r0, int64_t mm, float* y) {
    cpu::moe({x.data() + r0 * d, d, mm, refs.data(), E, k, ids.data() + r0 * k, wts.data() + r0 * k, &refs[E], y, d});
  };
  std::vector<float> y(size_t(m * d)), y_bf16(size_t(m * d));
  run(fp4, 0, m, y.data());
  {
    IsaScope expanded(expanded_isa());
    run(bf16, 0, m, y_bf16.data());
  }
  expect_same_bits(y, y_bf16, "FP4 MoE against expanded bf16");
  expect_rows_invariant(m, d, [&](int64_t r0, int64_t mm, float* out) { run(fp4, r0, mm, out); });
}

TEST(Fp4GemmDeathTest, NeedScales) {
  Fp4Weight fw(16, 64, 1);
  fw.w.scale_e8m0 = nullptr;
  const std::vector<float> x = random_floats(64, 2);
  std::vector<float> y(16);
  EXPECT_DEATH(cpu::linear({x.data(), 64, 1, &fw.w, y.data(), 16}), "FP4 weights need scale_e8m0");
}

INSTANTIATE_TEST_SUITE_P(IsasAndActivations, Fp4Gemm,
                         ::testing::Combine(::testing::ValuesIn(kAllIsas), ::testing::Values(DType::F32, DType::BF16)),
                         [](const auto& info) {
                           return isa_test_name(std::get<0>(info.param)) + "_" +
                                  std::string(dtype_name(std::get<1>(info.param))) + "_activations";
                         });

}  // namespace
}  // namespace deepinfer::test
