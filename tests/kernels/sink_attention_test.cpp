// Sink attention (cpu::sink_attention: linear scores, KernelTable::sink_softmax, outer_block value
// sums; with bf16 dots, amx's tiles or those steps on rounded inputs) on every ISA this CPU runs:
// against a double-precision evaluation of its formula (for bf16 dots, of the formula on the inputs
// and weights rounded to bf16), the sink in the denominator only, scores far outside e^x's range,
// and each head's bits independent of the other heads, of the threads and of being called inside a
// parallel region.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "kernel_test_util.h"
#include "kernels/cpu/sink_attention.h"

namespace deepinfer::test {
namespace {

struct Case {
  int heads, dim, keys;
};

float bf16_round(float x) { return bf16_to_f32(f32_to_bf16(x)); }


// The formula in double: out_h = sum_t w_t k_t, w_t = e^(s_t - mx) / (sum_t e^(s_t - mx) + e^(sink_h - mx)),
// with each w_t rounded to bf16 where round_weights. scale_out[h * dim + i] = sum_t w_t |k_t[i]|,
// the size the error is measured against; max_term[h * dim + i] = max_t w_t |k_t[i]|.
std::vector<double> reference(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& sink,
                              const Case& c, float scale, std::vector<double>& scale_out,
                              std::vector<double>* max_term = nullptr, bool round_weights = false) {
  std::vector<double> out(size_t(c.heads * c.dim), 0.0);
  scale_out.assign(out.size(), 0.0);
  if (max_term) max_term->assign(out.size(), 0.0);
  for (int h = 0; h < c.heads; ++h) {
    std::vector<double> s(size_t(c.keys));
    double mx = sink[size_t(h)];
    for (int t = 0; t < c.keys; ++t) {
      double dot = 0;
      for (int i = 0; i < c.dim; ++i) dot += double(q[size_t(h * c.dim + i)]) * double(k[size_t(t * c.dim + i)]);
      s[size_t(t)] = dot * double(scale);
      mx = std::max(mx, s[size_t(t)]);
    }
    double sum = std::exp(double(sink[size_t(h)]) - mx);
    for (double& v : s) sum += (v = std::exp(v - mx));
    for (int t = 0; t < c.keys; ++t)
      for (int i = 0; i < c.dim; ++i) {
        double w = s[size_t(t)] / sum;
        if (round_weights) w = bf16_round(float(w));
        const double kv = k[size_t(t * c.dim + i)];
        out[size_t(h * c.dim + i)] += w * kv;
        scale_out[size_t(h * c.dim + i)] += w * std::fabs(kv);
        if (max_term) (*max_term)[size_t(h * c.dim + i)] = std::max((*max_term)[size_t(h * c.dim + i)], w * std::fabs(kv));
      }
  }
  return out;
}

std::vector<float> attend(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& sink,
                          const Case& c, float scale, DType dots = DType::F32) {
  std::vector<float> out(size_t(c.heads * c.dim), -1.0f);
  cpu::sink_attention({q.data(), k.data(), sink.data(), out.data(), c.heads, c.dim, c.keys, scale, dots});
  return out;
}

class SinkAttention : public ::testing::TestWithParam<cpu::Isa> {
 protected:
  void SetUp() override {
    if (!cpu::cpu_runs(GetParam())) GTEST_SKIP() << "ISA not on this CPU";
  }
  IsaScope scope{cpu::cpu_runs(GetParam()) ? GetParam() : cpu::active_isa()};
};

// Shapes: a one-lane tail, heads not a multiple of the value tiles' 4, dims with a partial column
// block and a partial vector, one key, and DeepSeek-V4's 64 heads of 512 over a window plus entries.
TEST_P(SinkAttention, MatchesTheFormulaInDouble) {
  for (const Case& c : {Case{1, 2, 2}, Case{3, 70, 17}, Case{5, 130, 1}, Case{6, 64, 33}, Case{64, 512, 300}}) {
    const std::vector<float> q = random_floats(size_t(c.heads * c.dim), 1), k = random_floats(size_t(c.keys * c.dim), 2);
    const std::vector<float> sink = random_floats(size_t(c.heads), 3, 2.0f);
    const float scale = 1.0f / std::sqrt(float(c.dim));
    std::vector<double> size;
    const std::vector<double> want = reference(q, k, sink, c, scale, size);
    const std::vector<float> got = attend(q, k, sink, c, scale);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 2e-6 * size[i] + 1e-30) << c.heads << "x" << c.dim << " over " << c.keys << " keys, element " << i;
  }
}

// One query (1, 0), keys (0, 1) and (2, 3), sink 0.5: out = (e^0 k_0 + e^2 k_1) / (e^0 + e^2 + e^0.5).
TEST_P(SinkAttention, SinkJoinsTheDenominatorOnly) {
  const std::vector<float> q = {1.0f, 0.0f}, keys = {0.0f, 1.0f, 2.0f, 3.0f}, sink = {0.5f};
  const std::vector<float> out = attend(q, keys, sink, Case{1, 2, 2}, 1.0f);
  const double e0 = 1.0, e1 = std::exp(2.0), es = std::exp(0.5);
  EXPECT_NEAR(out[0], (e0 * 0 + e1 * 2) / (e0 + e1 + es), 1e-6);
  EXPECT_NEAR(out[1], (e0 * 1 + e1 * 3) / (e0 + e1 + es), 1e-6);
}

// Scores of +-1000 (e^x overflows and underflows far outside them) and a sink far above them: the
// maximum is subtracted first, so the weights stay finite and the dominant terms win.
TEST_P(SinkAttention, ScoresFarOutsideTheExponentialsRange) {
  const Case c{2, 16, 20};
  std::vector<float> q(size_t(c.heads * c.dim), 0.0f), k(size_t(c.keys * c.dim), 0.0f);
  q[0] = 1000.0f;                  // head 0: scores 1000 * k_t[0]
  q[size_t(c.dim)] = 1.0f;         // head 1: scores k_t[0], under a sink of 5000
  for (int t = 0; t < c.keys; ++t) {
    k[size_t(t * c.dim)] = t == 7 ? 1.0f : -1.0f;
    k[size_t(t * c.dim + 1)] = float(t);
  }
  const std::vector<float> out = attend(q, k, {0.0f, 5000.0f}, c, 1.0f);
  EXPECT_FLOAT_EQ(out[0], 1.0f);  // all weight on key 7
  EXPECT_FLOAT_EQ(out[1], 7.0f);
  EXPECT_NEAR(out[size_t(c.dim)], 0.0f, 1e-30f);  // all weight on the sink (vexp floors e^x near 1e-38)
  EXPECT_NEAR(out[size_t(c.dim) + 1], 0.0f, 1e-30f);
}

// bf16 dots: the queries and keys rounded to bf16 and each weight rounded to bf16 before the value
// sums. The f32 weights and the double reference's round alike except within an f32 error of a bf16
// midpoint, where a weight may take the neighbouring bf16 value (at most 2^-7 of it away).
TEST_P(SinkAttention, Bf16DotsMatchTheFormulaOnRoundedInputsInDouble) {
  for (const Case& c : {Case{1, 2, 2}, Case{3, 70, 17}, Case{5, 130, 1}, Case{20, 64, 33}, Case{64, 512, 300}}) {
    const std::vector<float> q = random_floats(size_t(c.heads * c.dim), 11), k = random_floats(size_t(c.keys * c.dim), 12);
    const std::vector<float> sink = random_floats(size_t(c.heads), 13, 2.0f);
    const float scale = 1.0f / std::sqrt(float(c.dim));
    std::vector<double> size, max_term;
    const std::vector<double> want = reference(bf16_rounded(q.data(), q.size()), bf16_rounded(k.data(), k.size()), sink, c, scale, size, &max_term, true);
    const std::vector<float> got = attend(q, k, sink, c, scale, DType::BF16);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 4e-6 * size[i] + std::ldexp(max_term[i], -7) + 1e-30)
          << c.heads << "x" << c.dim << " over " << c.keys << " keys, element " << i;
  }
}

// Two keys, scores 1 and 0 under a negligible sink: the weights e / (1 + e) = 0.7310586 and
// 1 / (1 + e) = 0.2689414 become bf16's 187/256 and 138/512, and a key element 1 + 2^-10 is read as
// 1, so the outputs are exactly those bf16 weights.
TEST_P(SinkAttention, Bf16DotsRoundTheKeysAndTheWeights) {
  const std::vector<float> q = {1.0f, 0.0f}, keys = {1.0f + 0x1p-10f, 0.0f, 0.0f, 1.0f}, sink = {-1000.0f};
  const std::vector<float> out = attend(q, keys, sink, Case{1, 2, 2}, 1.0f, DType::BF16);
  EXPECT_EQ(out[0], 187.0f / 256.0f);
  EXPECT_EQ(out[1], 138.0f / 512.0f);
}

// Each head's bits: the same with the other heads, alone, on one or two threads, and when the call
// runs inside a parallel region (as the models call it, one row per thread); with bf16 dots, heads
// in a second tile of 16 too.
TEST_P(SinkAttention, EachHeadIsBitwiseTheSameHoweverItIsRun) {
  for (const DType dots : {DType::F32, DType::BF16}) {
    const Case c{dots == DType::F32 ? 9 : 20, 200, 77};
    const std::vector<float> q = random_floats(size_t(c.heads * c.dim), 4), k = random_floats(size_t(c.keys * c.dim), 5);
    const std::vector<float> sink = random_floats(size_t(c.heads), 6);
    const float scale = 0.07f;
    std::vector<float> all;
    {
      ThreadScope t(2);
      all = attend(q, k, sink, c, scale, dots);
    }
    ThreadScope t(1);
    for (int h = 0; h < c.heads; ++h) {
      const std::vector<float> qh(q.begin() + h * c.dim, q.begin() + (h + 1) * c.dim);
      const std::vector<float> alone = attend(qh, k, {sink[size_t(h)]}, Case{1, c.dim, c.keys}, scale, dots);
      ASSERT_EQ(std::memcmp(alone.data(), all.data() + h * c.dim, size_t(c.dim) * 4), 0) << "head " << h;
    }
    std::vector<std::vector<float>> nested(4);
    {
      ThreadScope two(2);
#pragma omp parallel for schedule(static)
      for (int i = 0; i < 4; ++i) nested[size_t(i)] = attend(q, k, sink, c, scale, dots);
    }
    for (const std::vector<float>& n : nested) ASSERT_EQ(std::memcmp(n.data(), all.data(), all.size() * 4), 0);
  }
}

// Keys handed over already in bf16 (keys_bf16, rows of ld >= dim, zero past dim and n_keys) give
// the bits of the f32 keys they round from: rows padded to 32 and to 64 columns, key counts with
// and without a tail past the last 16.
TEST_P(SinkAttention, Bf16KeysGiveTheBitsOfTheKeysTheyRoundFrom) {
  for (const Case& c : {Case{3, 70, 17}, Case{20, 64, 33}, Case{64, 512, 160}}) {
    const std::vector<float> q = random_floats(size_t(c.heads * c.dim), 21), k = random_floats(size_t(c.keys * c.dim), 22);
    const std::vector<float> sink = random_floats(size_t(c.heads), 23, 2.0f);
    const std::vector<float> want = attend(q, k, sink, c, 0.1f, DType::BF16);
    for (const int64_t ld : {int64_t(c.dim + 31) / 32 * 32, int64_t(c.dim + 63) / 64 * 64 + 32}) {
      std::vector<uint16_t> kb(size_t((c.keys + 15) / 16 * 16 * ld), 0);
      for (int t = 0; t < c.keys; ++t)
        for (int i = 0; i < c.dim; ++i) kb[size_t(t * ld + i)] = f32_to_bf16(k[size_t(t * c.dim + i)]);
      std::vector<float> got(want.size(), -1.0f);
      SinkAttentionParams p{q.data(), nullptr, sink.data(), got.data(), c.heads, c.dim, c.keys, 0.1f, DType::BF16};
      p.keys_bf16 = kb.data();
      p.keys_bf16_ld = ld;
      cpu::sink_attention(p);
      ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0)
          << c.heads << "x" << c.dim << " over " << c.keys << " keys, ld " << ld;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, SinkAttention, ::testing::ValuesIn(kAllIsas),
                         [](const auto& info) { return isa_test_name(info.param); });

}  // namespace
}  // namespace deepinfer::test
