// Lightning-indexer scores with bf16, FP4 and fp8 keys (cpu::indexer_scores, KernelTable::indexer_score_block)
// on every ISA this CPU runs: against the formula in double over the bf16-rounded query and the
// dequantized keys (the products are exact, so only the f32 sums may differ), relu applied per head
// before the weighting, and each key's bits independent of the other keys, of the threads and of
// being called inside a parallel region.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu/indexer_scores.h"

namespace deepinfer::test {
namespace {

struct Case {
  int heads, dim, keys;
};

// Keys of one dtype: their rows' bytes one after another, and their values.
struct Keys {
  DType dtype = DType::BF16;
  int64_t row_bytes = 0;
  std::vector<uint8_t> bytes;
  std::vector<float> values;  // [keys, dim]
};

// Random keys: bf16 from normal floats; FP4 from random nibbles and scale bytes 124..130 (per 32
// elements); fp8 from random codes and a scale per key; dequantized as IndexerScoresParams says
// (the fp8 values code * scale rounded to f32, which the kernels' acc * scale matches to one
// rounding).
Keys make_keys(const Case& c, DType dtype, uint32_t seed) {
  Keys k;
  k.dtype = dtype;
  k.values.resize(size_t(c.keys * c.dim));
  if (dtype == DType::BF16) {
    const std::vector<float> f = random_floats(k.values.size(), seed);
    k.row_bytes = int64_t(c.dim) * 2;
    k.bytes.resize(size_t(c.keys * k.row_bytes));
    for (size_t i = 0; i < f.size(); ++i) {
      const uint16_t b = f32_to_bf16(f[i]);
      std::memcpy(k.bytes.data() + 2 * i, &b, 2);
      k.values[i] = bf16_to_f32(b);
    }
    return k;
  }
  if (dtype == DType::F8_E4M3) {  // codes without NaN (0x7f, 0xff), one scale per key
    std::mt19937 rng(seed);
    k.row_bytes = c.dim + 4;
    k.bytes.resize(size_t(c.keys * k.row_bytes));
    for (int e = 0; e < c.keys; ++e) {
      uint8_t* row = k.bytes.data() + e * k.row_bytes;
      const float scale = 0.001f * float(1 + rng() % 100);
      std::memcpy(row + c.dim, &scale, 4);
      for (int j = 0; j < c.dim; ++j) {
        uint8_t code = uint8_t(rng() & 0xff);
        if ((code & 0x7f) == 0x7f) code = uint8_t(code - 1);
        row[j] = code;
        k.values[size_t(e * c.dim + j)] = fp8_e4m3_to_f32(code) * scale;
      }
    }
    return k;
  }
  static constexpr float kE2M1[16] = {0, .5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -.5f, -1, -1.5f, -2, -3, -4, -6};
  std::mt19937 rng(seed);
  k.row_bytes = c.dim / 2 + c.dim / 32;
  k.bytes.resize(size_t(c.keys * k.row_bytes));
  for (int e = 0; e < c.keys; ++e) {
    uint8_t* row = k.bytes.data() + e * k.row_bytes;
    for (int b = 0; b < c.dim / 32; ++b) row[c.dim / 2 + b] = uint8_t(124 + rng() % 7);
    for (int j = 0; j < c.dim; j += 2) row[j / 2] = uint8_t(rng() & 0xff);
    for (int j = 0; j < c.dim; ++j)
      k.values[size_t(e * c.dim + j)] =
          kE2M1[(row[j / 2] >> (j % 2 ? 4 : 0)) & 15] * std::ldexp(1.0f, row[c.dim / 2 + j / 32] - 127);
  }
  return k;
}

// sum_h w_h relu(q_h . k_e) in double, q rounded to bf16 as the kernels do; size[e] =
// sum_h |w_h| sum_d |q_hd k_ed|, the size the f32 sums' error is measured against.
std::vector<double> reference(const std::vector<float>& q, const std::vector<float>& w, const Keys& k, const Case& c,
                              std::vector<double>& size) {
  std::vector<double> out(size_t(c.keys), 0.0);
  size.assign(out.size(), 0.0);
  for (int e = 0; e < c.keys; ++e)
    for (int h = 0; h < c.heads; ++h) {
      double dot = 0, mag = 0;
      for (int d = 0; d < c.dim; ++d) {
        const double p = double(bf16_to_f32(f32_to_bf16(q[size_t(h * c.dim + d)]))) * double(k.values[size_t(e * c.dim + d)]);
        dot += p;
        mag += std::fabs(p);
      }
      out[size_t(e)] += double(w[size_t(h)]) * std::max(dot, 0.0);
      size[size_t(e)] += std::fabs(double(w[size_t(h)])) * mag;
    }
  return out;
}

// Scores of keys [first, first + c.keys) of k, their rows laid out in reverse order in memory, as
// keys scattered over cache blocks are.
std::vector<float> scores(const std::vector<float>& q, const std::vector<float>& w, const Keys& k, int first, const Case& c) {
  std::vector<uint8_t> reversed(size_t(c.keys * k.row_bytes));
  std::vector<const void*> rows(size_t(c.keys));
  for (int e = 0; e < c.keys; ++e) {
    uint8_t* row = reversed.data() + (c.keys - 1 - e) * k.row_bytes;
    std::memcpy(row, k.bytes.data() + (first + e) * k.row_bytes, size_t(k.row_bytes));
    rows[size_t(e)] = row;
  }
  std::vector<float> out(size_t(c.keys), -1.0f);
  cpu::indexer_scores({q.data(), w.data(), rows.data(), k.dtype, out.data(), c.heads, c.dim, c.keys});
  return out;
}

class IndexerScores : public ::testing::TestWithParam<cpu::Isa> {
 protected:
  void SetUp() override {
    if (!cpu::cpu_runs(GetParam())) GTEST_SKIP() << "ISA not on this CPU";
  }
  IsaScope scope{cpu::cpu_runs(GetParam()) ? GetParam() : cpu::active_isa()};
};

// Shapes: one head and one dimension, odd dimensions (a last half pair), heads that fill no whole
// register group, fewer keys than a register tile, more head groups than the amx level's
// accumulator tiles (80 heads: five groups of 16, two passes), and DeepSeek-V4's 64 heads of 128
// over 1000 keys; bf16 keys, and FP4 keys where the dimension is a multiple of 32.
TEST_P(IndexerScores, MatchesTheFormulaInDouble) {
  for (const Case& c : {Case{1, 1, 1}, Case{3, 7, 5}, Case{16, 64, 11}, Case{5, 33, 3}, Case{8, 32, 9}, Case{80, 64, 37},
                        Case{64, 128, 1000}})
    for (DType dtype : {DType::BF16, DType::F4_E2M1, DType::F8_E4M3}) {
      if ((dtype == DType::F4_E2M1 && c.dim % 32 != 0) || (dtype == DType::F8_E4M3 && c.dim > 128)) continue;
      const std::vector<float> q = random_floats(size_t(c.heads * c.dim), 1), w = random_floats(size_t(c.heads), 2);
      const Keys k = make_keys(c, dtype, 3);
      std::vector<double> size;
      const std::vector<double> want = reference(q, w, k, c, size);
      const std::vector<float> got = scores(q, w, k, 0, c);
      // Each dot's sum rounds at most dim times (fp8: then its scaling, and the reference's values
      // once each) and the weighted sum over the heads at most 2 x heads times, each by at most
      // 2^-24 of a partial sum no larger than the size.
      for (int e = 0; e < c.keys; ++e)
        ASSERT_NEAR(got[size_t(e)], want[size_t(e)], (c.dim + 2 * c.heads + 2) * 0x1p-24 * size[size_t(e)] + 1e-30)
            << dtype_name(dtype) << ", " << c.heads << " heads x " << c.dim << " over " << c.keys << " keys, key " << e;
    }
}

// Head 0's dot is negative and head 1's positive: relu drops head 0 however large its weight.
TEST_P(IndexerScores, ReluDropsANegativeHeadBeforeItsWeight) {
  const Case c{2, 2, 1};
  Keys k;
  k.row_bytes = 4;
  const uint16_t row[2] = {f32_to_bf16(3.0f), f32_to_bf16(4.0f)};
  k.bytes.resize(4);
  std::memcpy(k.bytes.data(), row, 4);
  const std::vector<float> q = {-1.0f, 0.0f, 0.5f, 0.25f}, w = {100.0f, 2.0f};
  EXPECT_EQ(scores(q, w, k, 0, c)[0], 2.0f * (0.5f * 3.0f + 0.25f * 4.0f));
}

// Each key's bits: the same with the other keys, alone, on one or two threads, and when the call
// runs inside a parallel region (as the models call it, one row per thread); bf16, FP4 and fp8 keys.
TEST_P(IndexerScores, EachKeyIsBitwiseTheSameHoweverItIsRun) {
  const Case c{64, 128, 301};
  const std::vector<float> q = random_floats(size_t(c.heads * c.dim), 4), w = random_floats(size_t(c.heads), 5);
  for (DType dtype : {DType::BF16, DType::F4_E2M1, DType::F8_E4M3}) {
    const Keys k = make_keys(c, dtype, 6);
    std::vector<float> all;
    {
      ThreadScope t(2);
      all = scores(q, w, k, 0, c);
    }
    ThreadScope t(1);
    for (int e = 0; e < c.keys; e += 37) {
      const std::vector<float> alone = scores(q, w, k, e, Case{c.heads, c.dim, 1});
      ASSERT_EQ(std::memcmp(alone.data(), all.data() + e, 4), 0) << dtype_name(dtype) << ", key " << e;
    }
    std::vector<std::vector<float>> nested(4);
    {
      ThreadScope two(2);
#pragma omp parallel for schedule(static)
      for (int i = 0; i < 4; ++i) nested[size_t(i)] = scores(q, w, k, 0, c);
    }
    for (const std::vector<float>& n : nested) ASSERT_EQ(std::memcmp(n.data(), all.data(), all.size() * 4), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, IndexerScores, ::testing::ValuesIn(kAllIsas),
                         [](const auto& info) { return isa_test_name(info.param); });

// On AMX tiles (skipped elsewhere) a subnormal query element or bf16 key value counts as zero, as
// TDPBF16PS reads it (IndexerScoresParams): the score of 2^-130 x 2^100 is 0 there, where the
// vector levels give 2^-30.
class IndexerScoresAmx : public AmxLevelTest {};
TEST_F(IndexerScoresAmx, SubnormalQueryElementsAndKeysCountAsZero) {
  const Case c{1, 2, 1};
  const std::vector<float> w = {1.0f};
  for (bool subnormal_key : {false, true}) {
    const float tiny = std::ldexp(1.0f, -130), big = std::ldexp(1.0f, 100);
    const std::vector<float> q = {subnormal_key ? big : tiny, 0.0f};
    const uint16_t row[2] = {f32_to_bf16(subnormal_key ? tiny : big), 0};
    ASSERT_EQ(bf16_to_f32(row[0]), subnormal_key ? tiny : big) << "the key holds the value exactly";
    Keys k;
    k.row_bytes = 4;
    k.bytes.resize(4);
    std::memcpy(k.bytes.data(), row, 4);
    EXPECT_EQ(scores(q, w, k, 0, c)[0], 0.0f) << (subnormal_key ? "subnormal key" : "subnormal query element");
  }
}

}  // namespace
}  // namespace deepinfer::test
