// The arithmetic the compiler emits must not depend on the machine that built the project: the
// same multiply-add chain compiled with FMA for AMD Zen 3 and for Intel Ice Lake tunings gives the
// same bits, the sum of separately rounded products. Without -ffp-contract=off (CMakeLists.txt),
// GCC fuses the chain for Ice Lake and not for Zen, and this test fails; that difference once
// moved DeepSeek-V4.1's golden logprobs by 2.4e-3 on an AMD build against 2e-5 on an Intel one.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <random>
#include <vector>

float chain_tuned_for_zen(const float* a, const float* b, int n);
float chain_tuned_for_ice_lake(const float* a, const float* b, int n);

namespace {

TEST(BuildArithmetic, MultiplyAddChainsDoNotDependOnTheTuning) {
  if (!__builtin_cpu_supports("fma")) GTEST_SKIP() << "the probes are built with FMA";
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int n = 1000;
  std::vector<float> a(n), b(n);
  for (int i = 0; i < n; ++i) a[size_t(i)] = u(rng), b[size_t(i)] = u(rng);
  // Expected: each product rounded to f32, then added (a volatile keeps the two roundings apart).
  float want = 0.0f;
  for (int i = 0; i < n; ++i) {
    volatile float p = a[size_t(i)] * b[size_t(i)];
    want += p;
  }
  const float zen = chain_tuned_for_zen(a.data(), b.data(), n);
  const float ice = chain_tuned_for_ice_lake(a.data(), b.data(), n);
  EXPECT_EQ(std::bit_cast<uint32_t>(zen), std::bit_cast<uint32_t>(ice)) << zen << " vs " << ice;
  EXPECT_EQ(std::bit_cast<uint32_t>(ice), std::bit_cast<uint32_t>(want)) << ice << " vs " << want;
}

}  // namespace
