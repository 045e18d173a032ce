// Linear, SwiGLU and MLA absorb/projection kernels: against a scalar reference for every
// weight dtype and ISA, and bitwise per-row batch invariance (a row alone on one thread equals
// the same row inside a batch on many threads). bf16 activations (act_dtype BF16) are checked
// against the same reference on bf16-rounded inputs.
#include <gtest/gtest.h>

#include <cstring>
#include <tuple>

#include "kernel_test_util.h"
#include "kernels/cpu/gemm.h"

namespace deepinfer::test {
namespace {

using Case = std::tuple<cpu::Isa, DType>;

class Gemm : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (int(std::get<0>(GetParam())) > int(cpu::best_supported_isa())) GTEST_SKIP() << "ISA not on this CPU";
  }
  cpu::Isa isa() const { return std::get<0>(GetParam()); }
  DType dtype() const { return std::get<1>(GetParam()); }
};

TEST_P(Gemm, LinearMatchesReferenceAndIsBatchInvariant) {
  IsaScope scope(isa());
  for (auto [n_out, n_in] : {std::pair<int64_t, int64_t>{37, 300}, {64, 256}, {130, 1040}}) {
    TestWeight tw(dtype(), n_out, n_in, 7);
    const int64_t m = 19, ldx = n_in + 3;
    const std::vector<float> x = random_floats(size_t(m * ldx), 11);
    std::vector<float> y(size_t(m * n_out));
    cpu::linear({x.data(), ldx, m, &tw.w, y.data(), n_out});
    for (int64_t o = 0; o < n_out; ++o) {
      const std::vector<float> row = weight_row(tw.w, o);
      for (int64_t r = 0; r < m; ++r) {
        double scale = 0;
        for (int64_t i = 0; i < n_in; ++i) scale += std::fabs(double(x[size_t(r * ldx + i)]) * row[size_t(i)]);
        ASSERT_TRUE(near(y[size_t(r * n_out + o)], ref_dot(x.data() + r * ldx, row), scale))
            << "r " << r << " o " << o << ": " << y[size_t(r * n_out + o)] << " vs " << ref_dot(x.data() + r * ldx, row);
      }
    }
    expect_rows_invariant(m, n_out, [&](int64_t r0, int64_t mm, float* out) {
      cpu::linear({x.data() + r0 * ldx, ldx, mm, &tw.w, out, n_out});
    });
  }
}

// SwiGLU against the double reference (inputs rounded to bf16 first when act is BF16), then
// per-row batch invariance.
void expect_swiglu_matches_reference(DType w_dtype, DType act) {
  const int64_t inter = 45, n_in = 272, m = 13;
  TestWeight gate(w_dtype, inter, n_in, 3), up(w_dtype, inter, n_in, 4);
  gate.w.act_dtype = up.w.act_dtype = act;
  const std::vector<float> x = random_floats(size_t(m * n_in), 5);
  std::vector<float> y(size_t(m * inter));
  cpu::swiglu({x.data(), n_in, m, &gate.w, &up.w, y.data(), inter});
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x.data() + r * n_in;
    const std::vector<float> rounded = bf16_rounded(xr, size_t(n_in));
    if (act == DType::BF16) xr = rounded.data();
    for (int64_t o = 0; o < inter; ++o) {
      const double g = ref_dot(xr, weight_row(gate.w, o)), u = ref_dot(xr, weight_row(up.w, o));
      const double want = g / (1.0 + std::exp(-g)) * u;
      ASSERT_TRUE(near(y[size_t(r * inter + o)], want, std::fabs(want), 1e-4)) << y[size_t(r * inter + o)] << " vs " << want;
    }
  }
  expect_rows_invariant(m, inter, [&](int64_t r0, int64_t mm, float* out) {
    cpu::swiglu({x.data() + r0 * n_in, n_in, mm, &gate.w, &up.w, out, inter});
  });
}

TEST_P(Gemm, SwigluMatchesReferenceAndIsBatchInvariant) {
  IsaScope scope(isa());
  expect_swiglu_matches_reference(dtype(), DType::F32);
}

TEST_P(Gemm, MlaAbsorbAndProjectMatchReferenceAndAreBatchInvariant) {
  IsaScope scope(isa());
  const int H = 3, nope = 24, v = 20, c = 144, rope = 8;
  const int64_t m = 9, qk = nope + rope;
  TestWeight kvb(dtype(), H * (nope + v), c, 9);
  const std::vector<float> q = random_floats(size_t(m * H * qk), 10);
  std::vector<float> q_latent(size_t(m * H * c));
  cpu::mla_absorb_query({q.data(), H * qk, qk, m, &kvb.w, H, nope, v, q_latent.data()});
  for (int h = 0; h < H; ++h)
    for (int64_t r = 0; r < m; ++r)
      for (int j = 0; j < c; ++j) {
        double want = 0, scale = 0;
        for (int d = 0; d < nope; ++d) {
          const double t = double(q[size_t(r * H * qk + h * qk + d)]) * weight_row(kvb.w, h * (nope + v) + d)[size_t(j)];
          want += t;
          scale += std::fabs(t);
        }
        ASSERT_TRUE(near(q_latent[size_t((r * H + h) * c + j)], want, scale));
      }
  expect_rows_invariant(m, H * c, [&](int64_t r0, int64_t mm, float* out) {
    cpu::mla_absorb_query({q.data() + r0 * H * qk, H * qk, qk, mm, &kvb.w, H, nope, v, out});
  });

  std::vector<float> out(size_t(m * H * v));
  cpu::mla_project_value({q_latent.data(), m, &kvb.w, H, nope, v, out.data()});
  for (int h = 0; h < H; ++h)
    for (int j = 0; j < v; ++j) {
      const std::vector<float> row = weight_row(kvb.w, h * (nope + v) + nope + j);
      for (int64_t r = 0; r < m; ++r) {
        const float* ol = q_latent.data() + (r * H + h) * c;
        double scale = 0;
        for (int i = 0; i < c; ++i) scale += std::fabs(double(ol[i]) * row[size_t(i)]);
        ASSERT_TRUE(near(out[size_t(r * H * v + h * v + j)], ref_dot(ol, row), scale));
      }
    }
  expect_rows_invariant(m, H * v, [&](int64_t r0, int64_t mm, float* o) {
    cpu::mla_project_value({q_latent.data() + r0 * H * c, mm, &kvb.w, H, nope, v, o});
  });
}

class GemmBf16Activations : public ::testing::TestWithParam<cpu::Isa> {
 protected:
  void SetUp() override {
    if (int(GetParam()) > int(cpu::best_supported_isa())) GTEST_SKIP() << "ISA not on this CPU";
  }
};

// Products of bf16-rounded inputs with bf16 weights are exact; only the f32 sums differ from
// the double reference. n_in 1040 and 300 leave tails shorter than one 32-element dot step.
TEST_P(GemmBf16Activations, LinearMatchesRoundedReferenceAndIsBatchInvariant) {
  IsaScope scope(GetParam());
  for (auto [n_out, n_in] : {std::pair<int64_t, int64_t>{37, 300}, {64, 256}, {130, 1040}}) {
    TestWeight tw(DType::BF16, n_out, n_in, 7);
    tw.w.act_dtype = DType::BF16;
    const int64_t m = 19, ldx = n_in + 3;
    const std::vector<float> x = random_floats(size_t(m * ldx), 11);
    std::vector<float> y(size_t(m * n_out));
    cpu::linear({x.data(), ldx, m, &tw.w, y.data(), n_out});
    for (int64_t r = 0; r < m; ++r) {
      const std::vector<float> xr = bf16_rounded(x.data() + r * ldx, size_t(n_in));
      for (int64_t o = 0; o < n_out; ++o) {
        const std::vector<float> row = weight_row(tw.w, o);
        double scale = 0;
        for (int64_t i = 0; i < n_in; ++i) scale += std::fabs(double(xr[size_t(i)]) * row[size_t(i)]);
        const double want = ref_dot(xr.data(), row);
        ASSERT_TRUE(near(y[size_t(r * n_out + o)], want, scale)) << "r " << r << " o " << o << ": " << y[size_t(r * n_out + o)] << " vs " << want;
      }
    }
    expect_rows_invariant(m, n_out, [&](int64_t r0, int64_t mm, float* out) {
      cpu::linear({x.data() + r0 * ldx, ldx, mm, &tw.w, out, n_out});
    });
  }
}

TEST_P(GemmBf16Activations, SwigluMatchesRoundedReferenceAndIsBatchInvariant) {
  IsaScope scope(GetParam());
  expect_swiglu_matches_reference(DType::BF16, DType::BF16);
}

// The rounding is real: the same weights with f32 inputs give different outputs.
TEST_P(GemmBf16Activations, DiffersFromF32Activations) {
  IsaScope scope(GetParam());
  TestWeight tw(DType::BF16, 16, 256, 7);
  const std::vector<float> x = random_floats(256, 11);
  std::vector<float> y32(16), y16(16);
  cpu::linear({x.data(), 256, 1, &tw.w, y32.data(), 16});
  tw.w.act_dtype = DType::BF16;
  cpu::linear({x.data(), 256, 1, &tw.w, y16.data(), 16});
  EXPECT_NE(std::memcmp(y32.data(), y16.data(), sizeof(float) * 16), 0);
}

TEST(GemmBf16ActivationsDeathTest, NeedBf16Weights) {
  TestWeight tw(DType::F8_E4M3, 16, 256, 7);
  tw.w.act_dtype = DType::BF16;
  const std::vector<float> x = random_floats(256, 11);
  std::vector<float> y(16);
  EXPECT_DEATH(cpu::linear({x.data(), 256, 1, &tw.w, y.data(), 16}), "bf16 activations need bf16 weights");
}

INSTANTIATE_TEST_SUITE_P(Isas, GemmBf16Activations, ::testing::ValuesIn(kAllIsas),
                         [](const auto& info) { return std::string(cpu::isa_name(info.param)); });

INSTANTIATE_TEST_SUITE_P(IsasAndDtypes, Gemm,
                         ::testing::Combine(::testing::ValuesIn(kAllIsas),
                                            ::testing::Values(DType::F32, DType::BF16, DType::F16, DType::F8_E4M3)),
                         [](const auto& info) {
                           return std::string(cpu::isa_name(std::get<0>(info.param))) + "_" +
                                  std::string(dtype_name(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace deepinfer::test
