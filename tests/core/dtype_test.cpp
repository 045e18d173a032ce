// Unit tests for the scalar dtype conversions. Expected values are the IEEE/OCP definitions:
// bf16 is the top half of an f32; e4m3 (fn) has bias 7, 3 mantissa bits, max 448, no infinity.
#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace deepinfer {
namespace {

TEST(DType, Bf16RoundTripAndRounding) {
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  // 1 + 2^-8 is exactly halfway between 1 and 1 + 2^-7: ties go to the even code (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + 1.0f / 256), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.0f + 3.0f / 256), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(DType, Fp8E4M3Table) {
  EXPECT_EQ(fp8_e4m3_to_f32(0x00), 0.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x38), 1.0f);             // exp 7, mant 0
  EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);           // largest finite
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(fp8_e4m3_to_f32(0xb8), -1.0f);
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0xff)));
}

// The nearest finite e4m3 code to f by a scan of the decode table (ties to the even code, beyond
// 448 saturating), independent of the encoder's bit arithmetic.
uint8_t nearest_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const float a = std::fabs(f);
  int best = 0;
  for (int c = 1; c <= 0x7e; ++c) {
    const float d = std::fabs(fp8_e4m3_to_f32(uint8_t(c)) - a), db = std::fabs(fp8_e4m3_to_f32(uint8_t(best)) - a);
    if (d < db || (d == db && c % 2 == 0)) best = c;
  }
  return uint8_t((std::signbit(f) ? 0x80 : 0) | best);
}

TEST(DType, Ue8m0IsTwoToTheCodeLessBias) {  // the OCP MX definition: 2^(e - 127), 0xff NaN
  for (int e = 0; e < 255; ++e) {
    const float expected = std::ldexp(1.0f, e - 127);
    ASSERT_EQ(ue8m0_to_f32(uint8_t(e)), expected) << "code " << e;
  }
  EXPECT_TRUE(std::isnan(ue8m0_to_f32(0xff)));
  EXPECT_EQ(std::fpclassify(ue8m0_to_f32(0)), FP_SUBNORMAL);
}

TEST(DType, Fp8E4M3EncodeMatchesTableScan) {
  std::vector<float> values;
  for (uint32_t b = 0; b < 0x10000; ++b) values.push_back(bf16_to_f32(uint16_t(b)));  // every bf16, both signs
  for (int c = 0; c < 0x7f; ++c) {  // each code's midpoint to the next and its two neighbours
    const float lo = fp8_e4m3_to_f32(uint8_t(c)), hi = c < 0x7e ? fp8_e4m3_to_f32(uint8_t(c + 1)) : 480.0f;
    const float mid = (lo + hi) / 2;
    for (float v : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1000.0f)}) values.insert(values.end(), {v, -v});
  }
  std::mt19937 rng(3);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t u = rng();
    float v;
    std::memcpy(&v, &u, 4);
    values.push_back(v);
  }
  for (float v : values) {
    if (std::isnan(v)) continue;
    ASSERT_EQ(f32_to_fp8_e4m3(v), nearest_e4m3(v)) << "value " << v;
  }
  EXPECT_EQ(f32_to_fp8_e4m3(std::numeric_limits<float>::quiet_NaN()), 0x7f);
}

TEST(DType, Fp8E4M3EncodeIsNearestAndSaturates) {
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) continue;
    const float v = fp8_e4m3_to_f32(uint8_t(b));
    if (v == 0.0f) continue;  // +-0 both decode to zero
    EXPECT_EQ(f32_to_fp8_e4m3(v), b) << "code " << b;
  }
  EXPECT_EQ(f32_to_fp8_e4m3(1000.0f), 0x7e);
  EXPECT_EQ(f32_to_fp8_e4m3(-1000.0f), 0xfe);
  EXPECT_EQ(f32_to_fp8_e4m3(1.0625f), 0x38);  // halfway 1 and 1.125: tie to even (1.0)
  EXPECT_EQ(f32_to_fp8_e4m3(1.1f), 0x39);
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
}

}  // namespace
}  // namespace deepinfer
