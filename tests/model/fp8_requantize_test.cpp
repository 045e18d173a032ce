// Requantizing a bf16, f16 or f32 weight to fp8 e4m3 with 128 x 128 block scales
// (model/fp8_requantize.h), checked against the format's definition rather than the encoder:
// each block's scale is its largest magnitude over 448, and each code is a nearest e4m3 value
// to weight / scale (no neighbouring code is closer), so the bound the header states holds; the
// same for int8 (I8_SM) with a scale per row and 128 columns. Then the models'
// ModelOptions::lm_head_dtype: the lm_head (V3) and head (V4, V4.1) are held that way.
#include "model/fp8_requantize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "model/deepseek/model.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v41/model.h"
#include "model/loader.h"

namespace deepinfer {
namespace {

constexpr int64_t B = kRequantBlock;

float block_scale(const LinearWeight& q, int64_t r, int64_t c) {
  return q.scale_inv[(r / B) * ((q.n_in + B - 1) / B) + c / B];
}

// Every element of q against the source values w [n_out, n_in]: its block's scale is the block's
// largest |w| / 448 (1 for zeros), its code a nearest one, its error within the stated bound.
void expect_requantized(const LinearWeight& q, const std::vector<float>& w) {
  ASSERT_EQ(q.dtype, DType::F8_E4M3);
  ASSERT_EQ(q.block_rows, B);
  ASSERT_EQ(q.block_cols, B);
  const uint8_t* codes = static_cast<const uint8_t*>(q.data);
  std::vector<float> amax(size_t(((q.n_out + B - 1) / B) * ((q.n_in + B - 1) / B)), 0.0f);
  for (int64_t r = 0; r < q.n_out; ++r)
    for (int64_t c = 0; c < q.n_in; ++c) {
      float& a = amax[size_t((r / B) * ((q.n_in + B - 1) / B) + c / B)];
      a = std::max(a, std::fabs(w[size_t(r * q.n_in + c)]));
    }
  for (size_t i = 0; i < amax.size(); ++i) ASSERT_EQ(q.scale_inv[i], amax[i] > 0 ? amax[i] / 448.0f : 1.0f) << "block " << i;
  for (int64_t r = 0; r < q.n_out; ++r)
    for (int64_t c = 0; c < q.n_in; ++c) {
      const double x = w[size_t(r * q.n_in + c)], s = block_scale(q, r, c);
      const uint8_t code = codes[r * q.n_in + c];
      ASSERT_NE(code & 0x7f, 0x7f) << "NaN code at " << r << ", " << c;
      const double got = double(fp8_e4m3_to_f32(code)) * s, err = std::fabs(got - x);
      for (int d : {-1, 1}) {  // a neighbouring magnitude of the same sign is no closer (up to the f32 quotient's rounding)
        const int mag = (code & 0x7f) + d;
        if (mag < 0 || mag > 0x7e) continue;
        const double other = double(fp8_e4m3_to_f32(uint8_t((code & 0x80) | mag))) * s;
        ASSERT_LE(err, std::fabs(other - x) + std::ldexp(std::fabs(x), -22)) << "at " << r << ", " << c << ": " << x;
      }
      ASSERT_LE(err, std::ldexp(std::fabs(x), -4) + std::ldexp(s, -10) + std::ldexp(std::fabs(x), -22))
          << "at " << r << ", " << c;
      if (x != 0) {
        ASSERT_EQ(std::signbit(got), std::signbit(x));
      }
    }
}

// As expect_requantized for requantize_int8: per row and 128 columns, the scale is the block's
// largest |w| / 127 (1 for zeros), each code the nearest integer to w / scale (within 1/2, up to the
// f32 quotient's rounding), at most 127 in magnitude, zero as 0x00, with the weight's sign.
void expect_int8_requantized(const LinearWeight& q, const std::vector<float>& w) {
  constexpr int64_t C = kInt8BlockCols;
  ASSERT_EQ(q.dtype, DType::I8_SM);
  ASSERT_EQ(q.block_rows, 1);
  ASSERT_EQ(q.block_cols, C);
  const int64_t n_cb = (q.n_in + C - 1) / C;
  ASSERT_EQ(weight_scale_bytes(q), size_t(q.n_out * n_cb) * sizeof(float));
  const uint8_t* codes = static_cast<const uint8_t*>(q.data);
  for (int64_t r = 0; r < q.n_out; ++r)
    for (int64_t b = 0; b < n_cb; ++b) {
      float amax = 0.0f;
      for (int64_t c = b * C; c < std::min(q.n_in, (b + 1) * C); ++c) amax = std::max(amax, std::fabs(w[size_t(r * q.n_in + c)]));
      const float s = q.scale_inv[r * n_cb + b];
      ASSERT_EQ(s, amax > 0 ? amax / 127.0f : 1.0f) << "row " << r << ", block " << b;
      for (int64_t c = b * C; c < std::min(q.n_in, (b + 1) * C); ++c) {
        const double x = w[size_t(r * q.n_in + c)];
        const uint8_t code = codes[r * q.n_in + c];
        ASSERT_LE(code & 0x7f, 127);
        if ((code & 0x7f) == 0) {
          ASSERT_EQ(code, 0) << "zero with a sign at " << r << ", " << c;
        } else {
          ASSERT_EQ(code >> 7, x < 0 ? 1 : 0) << "at " << r << ", " << c;
        }
        const double got = double(int8_sm_to_f32(code)) * s;
        ASSERT_LE(std::fabs(got - x), 0.5 * s + std::ldexp(std::fabs(x), -22)) << "at " << r << ", " << c << ": " << x;
      }
    }
}

// Rows whose magnitudes span 2^-20 .. 2^4 (so blocks hold values deep in the subnormal codes of
// their scale), a block of zeros, and partial edge blocks (200 x 300).
std::vector<float> test_values(int64_t n_out, int64_t n_in) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  std::vector<float> w(size_t(n_out * n_in));
  for (int64_t r = 0; r < n_out; ++r)
    for (int64_t c = 0; c < n_in; ++c)
      w[size_t(r * n_in + c)] = r < B && c < B ? 0.0f : std::ldexp(normal(rng), -20 + int(r % 25));
  return w;
}

// The values w as bf16 (nearest) and as f16 (each value's f16 neighbour at or above it, below
// 65504), and what each holds.
struct Sources {
  std::vector<uint16_t> bf16, f16;
  std::vector<float> bf16_values, f16_values;
};
Sources sources_of(const std::vector<float>& w) {
  Sources k;
  k.bf16.resize(w.size());
  k.bf16_values.resize(w.size());
  for (size_t i = 0; i < w.size(); ++i) k.bf16_values[i] = bf16_to_f32(k.bf16[i] = f32_to_bf16(w[i]));
  std::vector<float> f16_table(0x7c00);  // the finite positive f16 values, ascending
  for (uint16_t b = 0; b < 0x7c00; ++b) f16_table[b] = f16_to_f32(b);
  k.f16.resize(w.size());
  k.f16_values.resize(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    const auto at = std::lower_bound(f16_table.begin(), f16_table.end(), std::fabs(w[i]));
    k.f16[i] = uint16_t(std::min<ptrdiff_t>(at - f16_table.begin(), 0x7bff) | (std::signbit(w[i]) ? 0x8000 : 0));
    k.f16_values[i] = f16_to_f32(k.f16[i]);
  }
  return k;
}

// requantize (requantize_fp8 or requantize_int8) of w [n_out, n_in] stored as bf16, f16 and f32,
// each checked by `expect` against the values it stores.
template <class Requantize, class Expect>
void for_each_source(const std::vector<float>& w, int64_t n_out, int64_t n_in, Requantize requantize, Expect expect) {
  const Sources k = sources_of(w);
  struct Case {
    DType dtype;
    const void* data;
    const std::vector<float>* values;
  } cases[] = {{DType::BF16, k.bf16.data(), &k.bf16_values}, {DType::F16, k.f16.data(), &k.f16_values}, {DType::F32, w.data(), &w}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(dtype_name(c.dtype)));
    LinearWeight src;
    src.dtype = c.dtype;
    src.data = c.data;
    src.n_out = n_out;
    src.n_in = n_in;
    src.act_dtype = DType::BF16;
    AlignedVector<uint8_t> store;
    Result<LinearWeight> q = requantize(src, store);
    ASSERT_TRUE(q.ok()) << q.status().message();
    EXPECT_EQ(q->act_dtype, DType::BF16);
    EXPECT_FALSE(q->tile_major);
    expect(*q, *c.values);
  }
}

TEST(RequantizeFp8, Bf16F16AndF32SourcesGiveNearestCodesPerBlockScale) {
  const int64_t n_out = 200, n_in = 300;
  for_each_source(test_values(n_out, n_in), n_out, n_in, requantize_fp8, [](const LinearWeight& q, const std::vector<float>& v) {
    EXPECT_EQ(weight_scale_bytes(q), size_t(2 * 3 * 4));
    expect_requantized(q, v);
  });
}

TEST(RequantizeInt8, Bf16F16AndF32SourcesGiveNearestCodesPerRowBlockScale) {
  const int64_t n_out = 70, n_in = 300;  // a partial last column block
  std::vector<float> w = test_values(n_out, n_in);
  w[size_t(3 * n_in + 200)] = -1e-30f;  // rounds to a zero code in its block, stored as 0x00
  for_each_source(w, n_out, n_in, requantize_int8, [](const LinearWeight& q, const std::vector<float>& v) {
    EXPECT_TRUE(admits_bf16_activations(q));
    expect_int8_requantized(q, v);
  });
}

// An f32 weight [n_out, n_in] of 0.5 with `bad` at (bad_row, 3) and a large finite value elsewhere:
// requantize fails with a message that names `rows`.
template <class Requantize>
void expect_bad_values_named(Requantize requantize, int64_t n_out, int64_t n_in, int64_t bad_row, const std::string& rows) {
  for (float bad : {INFINITY, -INFINITY, NAN, -NAN}) {
    std::vector<float> w(size_t(n_out * n_in), 0.5f);
    w[size_t(bad_row * n_in + 3)] = bad;
    w[size_t((n_out - 10) * n_in + 5)] = 1e38f;  // finite: fine
    LinearWeight src;
    src.dtype = DType::F32;
    src.data = w.data();
    src.n_out = n_out;
    src.n_in = n_in;
    AlignedVector<uint8_t> store;
    Result<LinearWeight> q = requantize(src, store);
    ASSERT_FALSE(q.ok()) << bad;
    EXPECT_NE(q.status().message().find(rows), std::string::npos) << q.status().message();
  }
}

TEST(RequantizeFp8, NanOrInfinityIsAnErrorNamingTheRows) {
  expect_bad_values_named(requantize_fp8, 300, 64, 260, "rows 256..299, which fp8");
}

TEST(RequantizeInt8, NanOrInfinityIsAnErrorNamingTheRow) {
  expect_bad_values_named(requantize_int8, 40, 256, 27, "row 27, which int8");
}

// The stored lm_head of a bf16 model (`head` picks it) and its requantized copy in a second load
// of the same folder (f32 activations: no level relays it, so it is read as laid out here; the
// relaid form keeps the values, RelaidWeightsGiveTheStoredWeightsBits and the end-to-end test show).
void expect_head_requantized(const std::string& fixture, const LinearWeight& (*head)(const CausalLM&)) {
  auto b = load_causal_lm(fixture);
  ASSERT_TRUE(b.ok()) << b.status().message();
  const LinearWeight& stored = head(**b);
  ASSERT_EQ(stored.dtype, DType::BF16);
  EXPECT_FALSE((*b)->info().lm_head_requantized);
  std::vector<float> values(size_t(stored.n_out * stored.n_in));
  for (size_t i = 0; i < values.size(); ++i) values[i] = bf16_to_f32(static_cast<const uint16_t*>(stored.data)[i]);
  for (DType to : {DType::F8_E4M3, DType::I8_SM}) {
    SCOPED_TRACE(std::string(dtype_name(to)));
    ModelOptions options;
    options.lm_head_dtype = to;
    auto a = load_causal_lm(fixture, options);
    ASSERT_TRUE(a.ok()) << a.status().message();
    EXPECT_EQ((*a)->info().lm_head_requantized, to);
    if (to == DType::F8_E4M3) expect_requantized(head(**a), values);
    else expect_int8_requantized(head(**a), values);
  }
}

TEST(Fp8LmHead, DeepseekV3HoldsItsLmHeadRequantized) {
  expect_head_requantized("tests/data/models/tiny-v3", [](const CausalLM& m) -> const LinearWeight& {
    return static_cast<const DeepseekModel&>(m).weights().lm_head;
  });
}

TEST(Fp8LmHead, DeepseekV4AndV41HoldTheirHeadRequantized) {
  expect_head_requantized("tests/data/models/tiny-v4-fp8", [](const CausalLM& m) -> const LinearWeight& {
    return static_cast<const DeepseekV4Model&>(m).weights().head;
  });
  expect_head_requantized("tests/data/models/tiny-v41", [](const CausalLM& m) -> const LinearWeight& {
    return static_cast<const DeepseekV41Model&>(m).weights().head;
  });
}

}  // namespace
}  // namespace deepinfer
