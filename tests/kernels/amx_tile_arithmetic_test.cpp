// The amx level's outputs, bitwise, against an independent model of its arithmetic: TDPBF16PS as
// Intel's Software Developer's Manual gives its operation. Per instruction (32 elements of k), the
// even and the odd elements' products are accumulated separately, each by f32 fused multiply-adds
// from zero in ascending k, and their sum is then added to the accumulator; every step rounds to
// nearest even with input and output subnormals flushed to zero. On top of that, simd_amx.h's
// contract: bf16 weights (and FP4 weights, as their exact bf16 expansion) feed one accumulator from
// zero, chunk after chunk; fp8 weights feed one per scale block, whose partial then goes into the
// total as fma(partial, scale, total). Rows of 1, 16 and 37 tokens (streamed weight rows, panels,
// several token tiles), n_in with a tail past the last chunk; and activations near f32's smallest
// normal, where the flushes decide bits. Skipped without AMX.
//
// What it pins: a kernel that reproduces these steps (on FMA units, say) gives the tiles' bits,
// so the amx level may choose per batch size between the two without breaking batch invariance.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <utility>

#include "kernel_test_util.h"
#include "kernels/cpu/gemm.h"

namespace deepinfer::test {
namespace {

class AmxTileArithmetic : public AmxLevelTest {};

float flush(float v) { return std::fabs(v) < FLT_MIN ? std::copysign(0.0f, v) : v; }

// One TDPBF16PS step of one output: acc + (sum of even products + sum of odd products) over the
// elements [k0, min(k0 + 32, n)) of x and w (bf16 values); without flushes for the test that shows
// they matter.
float tile_step(float acc, const float* x, const float* w, int64_t k0, int64_t n, bool flushes) {
  const auto f = [flushes](float v) { return flushes ? flush(v) : v; };
  float even = 0.0f, odd = 0.0f;
  for (int64_t i = k0; i < std::min(k0 + 32, n); ++i) {
    float& sum = (i - k0) % 2 == 0 ? even : odd;
    sum = f(std::fma(f(x[i]), f(w[i]), sum));
  }
  return f(acc + f(even + odd));
}

// x . w over [k0, k1) as the tiles compute it from a zeroed accumulator.
float tile_dot(const float* x, const float* w, int64_t k0, int64_t k1, bool flushes = true) {
  float acc = 0.0f;
  for (int64_t k = k0; k < k1; k += 32) acc = tile_step(acc, x, w, k, k1, flushes);
  return acc;
}

::testing::AssertionResult same_bits(float got, float want, int64_t r, int64_t o) {
  if (std::memcmp(&got, &want, 4) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "row " << r << " output " << o << ": " << got << " vs " << want;
}

// Runs w's linear on 1, 16 and 37 random rows and checks every output against want(xr, o), xr the
// row's activations rounded to bf16.
template <class Want>
void expect_outputs(const LinearWeight& w, uint32_t seed, Want want) {
  const std::vector<float> x = random_floats(size_t(37 * w.n_in), seed);
  for (int64_t m : {1, 16, 37}) {
    std::vector<float> y(size_t(m * w.n_out));
    cpu::linear({x.data(), w.n_in, m, &w, y.data(), w.n_out});
    for (int64_t r = 0; r < m; ++r) {
      const std::vector<float> xr = bf16_rounded(x.data() + r * w.n_in, size_t(w.n_in));
      for (int64_t o = 0; o < w.n_out; ++o) ASSERT_TRUE(same_bits(y[size_t(r * w.n_out + o)], want(xr, o), r, o));
    }
  }
}

TEST_F(AmxTileArithmetic, Bf16LinearIsTheManualsTdpbf16ps) {
  for (auto [n_out, n_in] : {std::pair<int64_t, int64_t>{37, 300}, {64, 2048}, {20, 1040}}) {
    SCOPED_TRACE(std::to_string(n_out) + " x " + std::to_string(n_in));
    TestWeight tw(DType::BF16, n_out, n_in, 7);
    tw.w.act_dtype = DType::BF16;
    expect_outputs(tw.w, 11, [&](const std::vector<float>& xr, int64_t o) {
      return tile_dot(xr.data(), weight_row(tw.w, o).data(), 0, n_in);
    });
  }
}

TEST_F(AmxTileArithmetic, Fp8LinearIsTheManualsTdpbf16psPerScaleBlock) {
  for (auto [n_out, n_in, block] : {std::tuple<int64_t, int64_t, int>{37, 300, 128}, {130, 1040, 32}, {16, 2048, 128}}) {
    SCOPED_TRACE(std::to_string(n_out) + " x " + std::to_string(n_in) + ", blocks of " + std::to_string(block));
    TestWeight tw(DType::F8_E4M3, n_out, n_in, 7, block);
    tw.w.act_dtype = DType::BF16;
    const int64_t n_cb = (n_in + block - 1) / block;
    expect_outputs(tw.w, 11, [&](const std::vector<float>& xr, int64_t o) {
      std::vector<float> codes(static_cast<size_t>(n_in));  // the e4m3 values, before their scales
      for (int64_t i = 0; i < n_in; ++i) codes[size_t(i)] = fp8_e4m3_to_f32(tw.bytes[size_t(o * n_in + i)]);
      float total = 0.0f;
      for (int64_t b = 0; b < n_cb; ++b) {
        const float part = tile_dot(xr.data(), codes.data(), b * block, std::min(n_in, (b + 1) * block));
        total = std::fma(part, tw.scales[size_t(o / block * n_cb + b)], total);
      }
      return total;
    });
  }
}

// Activations around f32's smallest normal (between 2^-136 and 2^-120): bf16 inputs, products and
// chain sums below it, which the tiles flush to zero as the model does. The model without its
// flushes differs from the tiles in some outputs, so these inputs do decide bits.
TEST_F(AmxTileArithmetic, SubnormalsAreFlushedAsTheManualSays) {
  const int64_t n_out = 40, n_in = 544;
  TestWeight tw(DType::BF16, n_out, n_in, 9);
  tw.w.act_dtype = DType::BF16;
  std::mt19937 rng(5);
  std::vector<float> x(size_t(16 * n_in));
  for (float& v : x) v = std::ldexp(1.0f + float(rng() % 128) / 128.0f, -136 + int(rng() % 16)) * (rng() % 2 ? 1.0f : -1.0f);
  // VCVTNEPS2BF16 (the activations' packing) reads f32 subnormals as zero, so an input just below
  // FLT_MIN that would round up to it becomes zero, not FLT_MIN.
  std::vector<float> x_flushed(x.size());
  for (size_t i = 0; i < x.size(); ++i) x_flushed[i] = flush(x[i]);
  int64_t unflushed_differs = 0, nonzero = 0;
  for (int64_t m : {1, 16}) {
    std::vector<float> y(size_t(m * n_out));
    cpu::linear({x.data(), n_in, m, &tw.w, y.data(), n_out});
    for (int64_t r = 0; r < m; ++r) {
      const std::vector<float> xr = bf16_rounded(x_flushed.data() + r * n_in, size_t(n_in));
      for (int64_t o = 0; o < n_out; ++o) {
        const std::vector<float> wr = weight_row(tw.w, o);
        const float got = y[size_t(r * n_out + o)], unflushed = tile_dot(xr.data(), wr.data(), 0, n_in, false);
        ASSERT_TRUE(same_bits(got, tile_dot(xr.data(), wr.data(), 0, n_in), r, o));
        unflushed_differs += std::memcmp(&got, &unflushed, 4) != 0;
        nonzero += got != 0.0f;
      }
    }
  }
  EXPECT_GT(unflushed_differs, 0);
  EXPECT_GT(nonzero, 17 * n_out / 2);
}

TEST_F(AmxTileArithmetic, Fp4LinearIsTheManualsTdpbf16psOnItsValues) {
  const int64_t n_out = 40, n_in = 1056;
  std::vector<uint8_t> packed(size_t(n_out * n_in / 2)), scales(size_t(n_out * n_in / 32));
  std::mt19937 rng(5);
  for (uint8_t& b : packed) b = uint8_t(rng());
  for (uint8_t& e : scales) e = uint8_t(118 + rng() % 9);
  LinearWeight w{DType::F4_E2M1, packed.data(), n_out, n_in};
  w.scale_e8m0 = scales.data();
  w.act_dtype = DType::BF16;
  expect_outputs(w, 13, [&](const std::vector<float>& xr, int64_t o) {
    std::vector<float> row(static_cast<size_t>(n_in));  // code times its block's scale: a bf16 value
    for (int64_t j = 0; j < n_in; ++j)
      row[size_t(j)] = fp4_e2m1_at(packed.data() + o * n_in / 2, j) * ue8m0_to_f32(scales[size_t((o * n_in + j) / 32)]);
    return tile_dot(xr.data(), row.data(), 0, n_in);
  });
}

}  // namespace
}  // namespace deepinfer::test
