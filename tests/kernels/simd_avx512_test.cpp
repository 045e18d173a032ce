// Avx512::hsum_4x4 (simd_avx512.h) against Avx512::hsum, bit for bit: the absorbed MLA attention
// reduces its 4 heads x 4 keys score tiles with it, and a row's scores must not change with how
// they are reduced. Inputs span many binades, so that a different pairing of the additions rounds
// differently (checked: a tree pairing lanes l and l + 1 first fails here). Compiled for AVX-512
// (CMakeLists.txt); skipped on CPUs without it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/simd_avx512.h"

namespace deepinfer::test {
namespace {

TEST(SimdAvx512, Hsum4x4IsHsumOfEachTileMemberBitForBit) {
  if (!cpu::cpu_runs(cpu::Isa::kAvx512)) GTEST_SKIP() << "no AVX-512 on this CPU";
  using V = cpu::Avx512;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-30, 30);
  for (int trial = 0; trial < 2000; ++trial) {
    alignas(64) float in[4][4][16];
    for (auto& tile : in)
      for (auto& vec : tile)
        for (float& x : vec) x = std::ldexp(mant(rng), expo(rng));
    V::F v[4][4];
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) v[i][j] = V::load(in[i][j]);
    alignas(64) float out[16];
    V::store(out, V::hsum_4x4(v));
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) {
        const float want = V::hsum(v[i][j]);
        uint32_t a, b;
        std::memcpy(&a, &out[4 * i + j], 4);
        std::memcpy(&b, &want, 4);
        ASSERT_EQ(a, b) << "trial " << trial << " head " << i << " key " << j;
      }
  }
}

}  // namespace
}  // namespace deepinfer::test
