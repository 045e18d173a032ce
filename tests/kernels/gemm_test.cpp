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
    if (!cpu::cpu_runs(std::get<0>(GetParam()))) GTEST_SKIP() << "ISA not on this CPU";
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
void expect_swiglu_matches_reference(DType w_dtype, DType act, int block = 128, int block_rows = 0) {
  const int64_t inter = 45, n_in = 272, m = 13;
  TestWeight gate(w_dtype, inter, n_in, 3, block, block_rows), up(w_dtype, inter, n_in, 4, block, block_rows);
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

// Weights that take bf16 activations: bf16, fp8 with 128 x 128 or 32 x 32 scale blocks, and int8
// (I8_SM) with a scale per row and 128 columns (requantize_int8's layout).
struct Bf16xWeight {
  DType dtype;
  int block;
  int block_rows = 0;  // 0: block
};
using Bf16xCase = std::tuple<cpu::Isa, Bf16xWeight>;

class GemmBf16Activations : public ::testing::TestWithParam<Bf16xCase> {
 protected:
  void SetUp() override {
    if (!cpu::cpu_runs(isa())) GTEST_SKIP() << "ISA not on this CPU";
  }
  cpu::Isa isa() const { return std::get<0>(GetParam()); }
  DType dtype() const { return std::get<1>(GetParam()).dtype; }
  int block() const { return std::get<1>(GetParam()).block; }
  int block_rows() const { return std::get<1>(GetParam()).block_rows; }
};

// Products of bf16-rounded inputs with bf16 weights (and with fp8 weights, converted to bf16
// exactly) are exact; only the f32 sums (and fp8's per-block scaling) differ from the double
// reference. n_in 1040 and 300 leave tails shorter than one 32-element dot step; m 29 takes two
// passes of rows (24 + 5), so every tile shape meets the one-row path in the invariance check.
TEST_P(GemmBf16Activations, LinearMatchesRoundedReferenceAndIsBatchInvariant) {
  IsaScope scope(isa());
  for (auto [n_out, n_in] : {std::pair<int64_t, int64_t>{37, 300}, {64, 256}, {130, 1040}}) {
    TestWeight tw(dtype(), n_out, n_in, 7, block(), block_rows());
    tw.w.act_dtype = DType::BF16;
    const int64_t m = 29, ldx = n_in + 3;
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
  IsaScope scope(isa());
  expect_swiglu_matches_reference(dtype(), DType::BF16, block(), block_rows());
}

// The rounding is real: the same weights with f32 inputs give different outputs.
TEST_P(GemmBf16Activations, DiffersFromF32Activations) {
  IsaScope scope(isa());
  TestWeight tw(dtype(), 16, 256, 7, block(), block_rows());
  const std::vector<float> x = random_floats(256, 11);
  std::vector<float> y32(16), y16(16);
  cpu::linear({x.data(), 256, 1, &tw.w, y32.data(), 16});
  tw.w.act_dtype = DType::BF16;
  cpu::linear({x.data(), 256, 1, &tw.w, y16.data(), 16});
  EXPECT_NE(std::memcmp(y32.data(), y16.data(), sizeof(float) * 16), 0);
}

// Every e4m3 code (NaN codes aside) against a one-hot bf16 input comes out as its exact value:
// the conversion to bf16 loses nothing, subnormals and signed zeros included.
TEST_P(GemmBf16Activations, Fp8CodesConvertExactly) {
  if (dtype() != DType::F8_E4M3) GTEST_SKIP() << "fp8 only";
  IsaScope scope(isa());
  TestWeight tw(DType::F8_E4M3, 1, 256, 7, block());
  for (int c = 0; c < 256; ++c) tw.bytes[size_t(c)] = (c & 0x7f) == 0x7f ? 0 : uint8_t(c);
  std::fill(tw.scales.begin(), tw.scales.end(), 1.0f);
  tw.w.act_dtype = DType::BF16;
  for (int c = 0; c < 256; ++c) {
    std::vector<float> x(256, 0.0f);
    x[size_t(c)] = 1.0f;
    float y = -1;
    cpu::linear({x.data(), 256, 1, &tw.w, &y, 1});
    EXPECT_EQ(y, fp8_e4m3_to_f32(tw.bytes[size_t(c)])) << "code " << c;
  }
}

// Every int8 (I8_SM) code against a one-hot input comes out as its value, sign and magnitude
// (bit 7 the sign, bits 0-6 the integer), with f32 and with bf16 activations; 0x80 is a zero.
TEST_P(GemmBf16Activations, Int8CodesConvertExactly) {
  if (dtype() != DType::I8_SM) GTEST_SKIP() << "int8 only";
  IsaScope scope(isa());
  TestWeight tw(DType::I8_SM, 1, 256, 7, block(), block_rows());
  for (int c = 0; c < 256; ++c) tw.bytes[size_t(c)] = uint8_t(c);
  std::fill(tw.scales.begin(), tw.scales.end(), 0.25f);
  for (DType act : {DType::F32, DType::BF16}) {
    tw.w.act_dtype = act;
    for (int c = 0; c < 256; ++c) {
      std::vector<float> x(256, 0.0f);
      x[size_t(c)] = 1.0f;
      float y = -1;
      cpu::linear({x.data(), 256, 1, &tw.w, &y, 1});
      EXPECT_EQ(y, (c & 0x80 ? -0.25f : 0.25f) * float(c & 0x7f)) << "code " << c << ", " << dtype_name(act) << " activations";
    }
  }
}

TEST(GemmBf16ActivationsDeathTest, NeedBf16OrFp8Weights) {
  TestWeight tw(DType::F16, 16, 256, 7);
  tw.w.act_dtype = DType::BF16;
  const std::vector<float> x = random_floats(256, 11);
  std::vector<float> y(16);
  EXPECT_DEATH(cpu::linear({x.data(), 256, 1, &tw.w, y.data(), 16}), "bf16 activations need bf16 or FP4 weights");
  TestWeight fp8(DType::F8_E4M3, 16, 256, 7, 16);  // blocks of 16 columns: not a whole dot step
  fp8.w.act_dtype = DType::BF16;
  EXPECT_DEATH(cpu::linear({x.data(), 256, 1, &fp8.w, y.data(), 16}), "multiple of 32 columns");
}

INSTANTIATE_TEST_SUITE_P(IsasAndWeights, GemmBf16Activations,
                         ::testing::Combine(::testing::ValuesIn(kAllIsas),
                                            ::testing::Values(Bf16xWeight{DType::BF16, 128},
                                                              Bf16xWeight{DType::F8_E4M3, 128},
                                                              Bf16xWeight{DType::F8_E4M3, 32},
                                                              Bf16xWeight{DType::I8_SM, 128, 1})),
                         [](const auto& info) {
                           const Bf16xWeight w = std::get<1>(info.param);
                           return isa_test_name(std::get<0>(info.param)) + "_" +
                                  std::string(dtype_name(w.dtype)) +
                                  (has_block_scales(w.dtype) ? "_block" + std::to_string(w.block_rows ? w.block_rows : w.block) +
                                                                   "x" + std::to_string(w.block)
                                                             : "");
                         });

INSTANTIATE_TEST_SUITE_P(IsasAndDtypes, Gemm,
                         ::testing::Combine(::testing::ValuesIn(kAllIsas),
                                            ::testing::Values(DType::F32, DType::BF16, DType::F16, DType::F8_E4M3, DType::I8_SM)),
                         [](const auto& info) {
                           return isa_test_name(std::get<0>(info.param)) + "_" +
                                  std::string(dtype_name(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace deepinfer::test
