// The MoE kernel: routed experts grouped by expert plus shared experts, against a scalar
// reference, and bitwise per-row batch invariance for every weight dtype and ISA, with f32
// activations and (bf16 and fp8 weights) with bf16 activations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <tuple>

#include "kernel_test_util.h"
#include "kernels/cpu/moe.h"

namespace deepinfer::test {
namespace {

struct TestMlp {
  std::unique_ptr<TestWeight> gate, up, down;
  MlpWeightRefs refs() const { return {&gate->w, &up->w, &down->w}; }
  TestMlp(DType t, DType act, int64_t d, int64_t inter, uint32_t seed)
      : gate(std::make_unique<TestWeight>(t, inter, d, seed)),
        up(std::make_unique<TestWeight>(t, inter, d, seed + 10)),
        down(std::make_unique<TestWeight>(t, d, inter, seed + 20)) {
    gate->w.act_dtype = up->w.act_dtype = down->w.act_dtype = act;
  }

  // In double; with bf16 activations, x and the SwiGLU output are rounded to bf16 first.
  std::vector<double> ref(const float* x_in) const {
    const int64_t inter = gate->w.n_out, d = gate->w.n_in;
    const bool bf16 = gate->w.act_dtype == DType::BF16;
    const std::vector<float> x = bf16 ? bf16_rounded(x_in, size_t(d)) : std::vector<float>(x_in, x_in + d);
    std::vector<float> act(static_cast<size_t>(inter));
    for (int64_t i = 0; i < inter; ++i) {
      const double g = ref_dot(x.data(), weight_row(gate->w, i)), u = ref_dot(x.data(), weight_row(up->w, i));
      act[size_t(i)] = float(g / (1.0 + std::exp(-g)) * u);
    }
    if (bf16) act = bf16_rounded(act.data(), act.size());
    std::vector<double> y(static_cast<size_t>(d));
    for (int64_t o = 0; o < d; ++o) y[size_t(o)] = ref_dot(act.data(), weight_row(down->w, o));
    return y;
  }
};

// (weight dtype, activation dtype)
using Dtypes = std::pair<DType, DType>;
class Moe : public ::testing::TestWithParam<std::tuple<cpu::Isa, Dtypes>> {};

TEST_P(Moe, MatchesReferenceAndIsBatchInvariant) {
  const cpu::Isa isa = std::get<0>(GetParam());
  if (!cpu::cpu_runs(isa)) GTEST_SKIP() << "ISA not on this CPU";
  IsaScope scope(isa);
  const auto [dtype, act] = std::get<1>(GetParam());
  const int64_t d = 96, inter = 40, m = 21;
  const int E = 8, k = 3;
  std::vector<TestMlp> experts;
  for (int e = 0; e < E; ++e) experts.emplace_back(dtype, act, d, inter, 100 + 7 * e);
  const TestMlp shared(dtype, act, d, 2 * inter, 999);
  std::vector<MlpWeightRefs> refs;
  for (const auto& e : experts) refs.push_back(e.refs());
  const MlpWeightRefs shared_refs = shared.refs();

  const std::vector<float> x = random_floats(size_t(m * d), 1);
  std::vector<int32_t> ids(size_t(m * k));
  std::vector<float> wts(size_t(m * k));
  std::mt19937 rng(3);
  for (int64_t r = 0; r < m; ++r) {
    std::vector<int32_t> all(E);
    for (int e = 0; e < E; ++e) all[size_t(e)] = e;
    std::shuffle(all.begin(), all.end(), rng);
    for (int j = 0; j < k; ++j) {
      ids[size_t(r * k + j)] = r < 4 ? j : all[size_t(j)];  // rows 0-3 share experts 0-2
      wts[size_t(r * k + j)] = 0.1f + 0.3f * float(j);
    }
  }
  auto run = [&](int64_t r0, int64_t mm, float* y) {
    cpu::moe({x.data() + r0 * d, d, mm, refs.data(), E, k, ids.data() + r0 * k, wts.data() + r0 * k, &shared_refs, y, d});
  };

  std::vector<float> y(size_t(m * d));
  run(0, m, y.data());
  for (int64_t r = 0; r < m; ++r) {
    std::vector<double> want = shared.ref(x.data() + r * d);
    for (int j = 0; j < k; ++j) {
      const std::vector<double> e = experts[size_t(ids[size_t(r * k + j)])].ref(x.data() + r * d);
      for (int64_t o = 0; o < d; ++o) want[size_t(o)] += wts[size_t(r * k + j)] * e[size_t(o)];
    }
    // bf16: an f32 SwiGLU output next to a rounding boundary may round the other way than the
    // double reference's, which moves the output by up to ~1e-4.
    const double rel = act == DType::BF16 ? 2e-3 : 1e-4;
    for (int64_t o = 0; o < d; ++o)
      ASSERT_TRUE(near(y[size_t(r * d + o)], want[size_t(o)], 0.05, rel)) << y[size_t(r * d + o)] << " vs " << want[size_t(o)];
  }

  expect_rows_invariant(m, d, run);
}

INSTANTIATE_TEST_SUITE_P(IsasAndDtypes, Moe,
                         ::testing::Combine(::testing::ValuesIn(kAllIsas),
                                            ::testing::Values(Dtypes{DType::BF16, DType::F32},
                                                              Dtypes{DType::F8_E4M3, DType::F32},
                                                              Dtypes{DType::BF16, DType::BF16},
                                                              Dtypes{DType::F8_E4M3, DType::BF16})),
                         [](const auto& info) {
                           const Dtypes t = std::get<1>(info.param);
                           return isa_test_name(std::get<0>(info.param)) + "_" +
                                  std::string(dtype_name(t.first)) + "_" + std::string(dtype_name(t.second)) +
                                  "_activations";
                         });

}  // namespace
}  // namespace deepinfer::test
