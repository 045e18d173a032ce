// DeepSeek-V4.1's KV formats against the rules the fixtures' README states for the reference's
// fake-quant (modeling_deepseek_v41.py @ 0a2080b4, M:359-399): e2m1 ties to even, the scales'
// floors and roundings, the clamp where an e4m3 scale rounds down, the stored sizes, and the bf16
// load's values.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "core/dtype.h"
#include "model/deepseek_v41/kv_formats.h"

namespace deepinfer {
namespace {

std::vector<float> round_trip(V41KvFormat f, std::vector<float> x) {
  std::vector<uint8_t> bytes(v41_kv_bytes(f, int(x.size())));
  v41_kv_store(f, x.data(), int(x.size()), bytes.data());
  std::vector<float> y(x.size());
  v41_kv_load(f, bytes.data(), int(x.size()), y.data());
  std::vector<float> z = x;
  v41_fake_quant(f, z.data(), int(z.size()));
  EXPECT_EQ(y, z);  // what is stored is what the fake-quant gives
  return y;
}

// README: |v| = .25 -> 0, .75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4; negatives
// mirror it. A block whose amax is 6 has scale 2^ceil(log2(6 * f32(1/6))) = 1.
TEST(V41KvFormats, E2m1RoundsToNearestEven) {
  std::vector<float> x = {6, .25f, .75f, 1.25f, 1.75f, 2.5f, 3.5f, 5, -.75f, -2.5f, -5, .3f, 2.6f, 5.1f};
  x.resize(32, 0.0f);
  const std::vector<float> y = round_trip(V41KvFormat::kFp4Ue8m0Block32, x);
  const std::vector<float> want = {6, 0, 1, 1, 2, 2, 4, 4, -1, -2, -4, .5f, 3, 6};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(y[i], want[i]) << "x = " << x[i];
}

// Every bf16 value in [-6, 6] and both neighbours of each midpoint between two codes, in blocks
// whose amax is 6 (scale 1): each stores as the code nearest it, ties to the even code, found by
// scanning the README's eight magnitudes.
TEST(V41KvFormats, E2m1IsTheNearestCodeForEveryValue) {
  const float codes[8] = {0, .5f, 1, 1.5f, 2, 3, 4, 6};
  auto nearest = [&](float v) {
    int best = 0;
    for (int c = 1; c < 8; ++c) {
      const double d = std::fabs(double(codes[c]) - std::fabs(double(v)));
      const double db = std::fabs(double(codes[best]) - std::fabs(double(v)));
      if (d < db || (d == db && c % 2 == 0)) best = c;
    }
    return v < 0 ? -codes[best] : codes[best];
  };
  std::vector<float> values;
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint32_t u = b << 16;
    float v;
    std::memcpy(&v, &u, 4);
    if (std::fabs(v) <= 6.0f) values.push_back(v);
  }
  for (int c = 0; c + 1 < 8; ++c) {
    const float mid = (codes[c] + codes[c + 1]) / 2;
    for (float v : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 7.0f)}) values.insert(values.end(), {v, -v});
  }
  for (size_t i = 0; i < values.size(); i += 31) {
    std::vector<float> x(32, 0.0f);
    x[0] = 6;
    for (size_t j = 0; j < 31 && i + j < values.size(); ++j) x[j + 1] = values[i + j];
    const std::vector<float> y = round_trip(V41KvFormat::kFp4Ue8m0Block32, x);
    for (size_t j = 0; j < 32; ++j) ASSERT_EQ(y[j], nearest(x[j])) << "x = " << x[j];
  }
}

TEST(V41KvFormats, UE8M0ScalesArePowersOfTwoAboveAmax) {
  std::vector<float> x(32, 0.0f);
  x[0] = 7;  // scale 2^ceil(log2(7/6)) = 2: 7/2 = 3.5 -> 4 -> 8
  x[1] = 1;  // 0.5 -> 1
  const std::vector<float> y = round_trip(V41KvFormat::kFp4Ue8m0Block32, x);
  EXPECT_EQ(y[0], 8.0f);
  EXPECT_EQ(y[1], 1.0f);
  std::vector<float> zero(32, 0.0f);  // the floor 6 * 2^-126 keeps an all-zero block finite
  EXPECT_EQ(round_trip(V41KvFormat::kFp4Ue8m0Block32, zero), zero);
}

// e4m3 scale per 16 = e4m3(amax / 6): amax 7 gives 1.125 (7/6 rounds down), so 7 clamps to 6
// and dequantizes to 6.75 (README: the clamp can bind).
TEST(V41KvFormats, E4m3ScaleMayRoundDownAndTheClampBinds) {
  std::vector<float> x(16, 0.0f);
  x[0] = 7;
  x[1] = -1.2f;  // -1.2 / 1.125 = -1.067 -> -1 -> -1.125
  const std::vector<float> y = round_trip(V41KvFormat::kFp4E4m3Block16, x);
  EXPECT_EQ(y[0], 6.75f);
  EXPECT_EQ(y[1], -1.125f);
  std::vector<float> tiny(16, 1e-6f);  // floor 6 * 2^-9: scale 2^-9, values round to 0
  EXPECT_EQ(round_trip(V41KvFormat::kFp4E4m3Block16, tiny), std::vector<float>(16, 0.0f));
}

// fp8 per 32 with ue8m0 scale 2^ceil(log2(max(amax, 1e-4) / 448)): amax 448 gives scale 1, so
// values round to e4m3 directly (0.1 -> 13/128, 17 ties to the even 16); amax 449 gives 2.
TEST(V41KvFormats, Fp8BlocksOf32) {
  std::vector<float> x(32, 0.0f);
  x[0] = 448;
  x[1] = 0.1f;
  x[2] = 17;
  std::vector<float> y = round_trip(V41KvFormat::kFp8Block32, x);
  EXPECT_EQ(y[1], 13.0f / 128);
  EXPECT_EQ(y[2], 16.0f);
  x[0] = 449;  // scale 2: 449 / 2 = 224.5 -> 224 -> 448
  y = round_trip(V41KvFormat::kFp8Block32, x);
  EXPECT_EQ(y[0], 448.0f);
  EXPECT_EQ(y[2], 16.0f);
}

// The bf16 load (the attention's keys under bf16 dots) takes each stored value's upper half; that
// is the value rounded to nearest even, because every format's values are exact in bf16: checked
// over blocks whose amax spans 2^-30 (below the scales' floors) to 2^20, zeros past n up to ld.
TEST(V41KvFormats, Bf16LoadIsTheLoadedValuesRounded) {
  uint32_t state = 7;
  const auto next = [&] { return (state = state * 1664525u + 1013904223u) >> 8; };
  for (V41KvFormat f : {V41KvFormat::kFp8Block32, V41KvFormat::kFp4E4m3Block16, V41KvFormat::kFp4Ue8m0Block32,
                        V41KvFormat::kF32}) {
    for (int e = -30; e <= 20; e += 5) {
      std::vector<float> x(64);
      for (float& v : x) v = std::ldexp(float(next() % 2001) / 1000.0f - 1.0f, e);
      std::vector<uint8_t> bytes(v41_kv_bytes(f, 64));
      v41_kv_store(f, x.data(), 64, bytes.data());
      std::vector<float> y(64);
      v41_kv_load(f, bytes.data(), 64, y.data());
      std::vector<uint16_t> b(96, 0xffff);
      v41_kv_load_bf16(f, bytes.data(), 64, b.data(), 96);
      for (int j = 0; j < 64; ++j) {
        ASSERT_EQ(b[size_t(j)], f32_to_bf16(y[size_t(j)])) << "format " << int(f) << ", 2^" << e << ", element " << j;
        if (f != V41KvFormat::kF32) ASSERT_EQ(bf16_to_f32(b[size_t(j)]), y[size_t(j)]);
      }
      for (int j = 64; j < 96; ++j) ASSERT_EQ(b[size_t(j)], 0);
    }
  }
}

TEST(V41KvFormats, StoredSizes) {
  EXPECT_EQ(v41_kv_bytes(V41KvFormat::kF32, 40), 160u);
  EXPECT_EQ(v41_kv_bytes(V41KvFormat::kFp8Block32, 64), 66u);       // README: tiny-v41-qat window 66 B
  EXPECT_EQ(v41_kv_bytes(V41KvFormat::kFp4E4m3Block16, 64), 36u);   // compressed entry 36 B
  EXPECT_EQ(v41_kv_bytes(V41KvFormat::kFp4Ue8m0Block32, 32), 17u);  // indexer key 17 B
}

}  // namespace
}  // namespace deepinfer
