// The amx level's bf16 x bf16 blocks (simd_amx.h): every batch size 1..300 gives each row the
// bits it gets alone (one token tile streams the weights, more go through panels; passes, K
// blocks, output tails, weights of fewer than 16 rows, n_in not a multiple of 32), on one and on
// two threads, and the outputs match a double reference on the bf16-rounded inputs. Skipped
// where the CPU or OS offers no AMX.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

#include "kernel_test_util.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/moe.h"

namespace deepinfer::test {
namespace {

class AmxGemm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cpu::best_supported_isa() < cpu::Isa::kAmx) GTEST_SKIP() << "no AMX on this CPU (or not granted by the OS)";
  }
};

std::unique_ptr<TestWeight> bf16_weight(int64_t n_out, int64_t n_in, uint32_t seed) {
  auto w = std::make_unique<TestWeight>(DType::BF16, n_out, n_in, seed);
  w->w.act_dtype = DType::BF16;
  return w;
}

// (n_out, n_in): odd tails of both, 16-row tiles exactly, a weight of 5 rows, and n_in a
// multiple of 32 with a last output group past the matrix (streamed rows fall back to a panel).
const std::pair<int64_t, int64_t> kShapes[] = {{37, 300}, {64, 256}, {130, 1040}, {5, 64}, {37, 256}};

TEST_F(AmxGemm, LinearMatchesReferenceForEveryBatchSize) {
  IsaScope scope(cpu::Isa::kAmx);
  for (auto [n_out, n_in] : kShapes) {
    SCOPED_TRACE(std::to_string(n_out) + " x " + std::to_string(n_in));
    const auto tw = bf16_weight(n_out, n_in, 7);
    const int64_t ldx = n_in + 5;
    const std::vector<float> x = random_floats(size_t(kMaxRows * ldx), 11);
    std::vector<float> y(size_t(kMaxRows * n_out));
    cpu::linear({x.data(), ldx, kMaxRows, &tw->w, y.data(), n_out});
    for (int64_t r = 0; r < kMaxRows; r += 13) {
      const std::vector<float> xr = bf16_rounded(x.data() + r * ldx, size_t(n_in));
      for (int64_t o = 0; o < n_out; ++o) {
        const std::vector<float> row = weight_row(tw->w, o);
        double scale = 0;
        for (int64_t i = 0; i < n_in; ++i) scale += std::fabs(double(xr[size_t(i)]) * row[size_t(i)]);
        ASSERT_TRUE(near(y[size_t(r * n_out + o)], ref_dot(xr.data(), row), scale))
            << "r " << r << " o " << o << ": " << y[size_t(r * n_out + o)] << " vs " << ref_dot(xr.data(), row);
      }
    }
    expect_every_batch_size_invariant(n_out, [&](int64_t r0, int64_t m, float* out) {
      cpu::linear({x.data() + r0 * ldx, ldx, m, &tw->w, out, n_out});
    });
  }
}

TEST_F(AmxGemm, SwigluMatchesReferenceForEveryBatchSize) {
  IsaScope scope(cpu::Isa::kAmx);
  for (auto [inter, n_in] : {std::pair<int64_t, int64_t>{45, 272}, {32, 512}, {7, 64}}) {
    SCOPED_TRACE(std::to_string(inter) + " x " + std::to_string(n_in));
    const auto gate = bf16_weight(inter, n_in, 3), up = bf16_weight(inter, n_in, 4);
    const std::vector<float> x = random_floats(size_t(kMaxRows * n_in), 5);
    std::vector<float> y(size_t(kMaxRows * inter));
    cpu::swiglu({x.data(), n_in, kMaxRows, &gate->w, &up->w, y.data(), inter});
    for (int64_t r = 0; r < kMaxRows; r += 17) {
      const std::vector<float> xr = bf16_rounded(x.data() + r * n_in, size_t(n_in));
      for (int64_t o = 0; o < inter; ++o) {
        const double g = ref_dot(xr.data(), weight_row(gate->w, o)), u = ref_dot(xr.data(), weight_row(up->w, o));
        const double want = g / (1.0 + std::exp(-g)) * u;
        ASSERT_TRUE(near(y[size_t(r * inter + o)], want, std::fabs(want), 1e-4)) << y[size_t(r * inter + o)] << " vs " << want;
      }
    }
    expect_every_batch_size_invariant(inter, [&](int64_t r0, int64_t m, float* out) {
      cpu::swiglu({x.data() + r0 * n_in, n_in, m, &gate->w, &up->w, out, inter});
    });
  }
}

// MoE with groups from one row to several token tiles: each row's output is the one it gets alone.
TEST_F(AmxGemm, MoeIsInvariantForEveryBatchSize) {
  IsaScope scope(cpu::Isa::kAmx);
  const int64_t d = 96, inter = 40;
  const int E = 4;
  std::vector<std::unique_ptr<TestWeight>> ws;
  std::vector<MlpWeightRefs> experts;
  for (int e = 0; e <= E; ++e) {  // the last is the shared expert
    const int64_t width = e == E ? 2 * inter : inter;
    ws.push_back(bf16_weight(width, d, 100 + 7 * e));
    ws.push_back(bf16_weight(width, d, 101 + 7 * e));
    ws.push_back(bf16_weight(d, width, 102 + 7 * e));
    if (e < E) experts.push_back({&ws[ws.size() - 3]->w, &ws[ws.size() - 2]->w, &ws[ws.size() - 1]->w});
  }
  const MlpWeightRefs shared{&ws[ws.size() - 3]->w, &ws[ws.size() - 2]->w, &ws[ws.size() - 1]->w};
  expect_moe_invariant_for_every_batch_size(d, experts.data(), E, &shared);
}

}  // namespace
}  // namespace deepinfer::test
