// Lightning-indexer scores with bf16 keys (cpu::indexer_scores, KernelTable::indexer_score_block) on
// every ISA this CPU runs: against the formula in double over the bf16-rounded query (the products
// are exact, so only the f32 sums may differ), relu applied per head before the weighting, and each
// key's bits independent of the other keys, of the threads and of being called inside a parallel
// region.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cpu/indexer_scores.h"

namespace deepinfer::test {
namespace {

struct Case {
  int heads, dim, keys;
};

std::vector<uint16_t> bf16_keys(const Case& c, uint32_t seed) {
  const std::vector<float> f = random_floats(size_t(c.keys * c.dim), seed);
  std::vector<uint16_t> out(f.size());
  for (size_t i = 0; i < f.size(); ++i) out[i] = f32_to_bf16(f[i]);
  return out;
}

// sum_h w_h relu(q_h . k_e) in double, q rounded to bf16 as the kernels do; size[e] =
// sum_h |w_h| sum_d |q_hd k_ed|, the size the f32 sums' error is measured against.
std::vector<double> reference(const std::vector<float>& q, const std::vector<float>& w, const std::vector<uint16_t>& k,
                              const Case& c, std::vector<double>& size) {
  std::vector<double> out(size_t(c.keys), 0.0);
  size.assign(out.size(), 0.0);
  for (int e = 0; e < c.keys; ++e)
    for (int h = 0; h < c.heads; ++h) {
      double dot = 0, mag = 0;
      for (int d = 0; d < c.dim; ++d) {
        const double p = double(bf16_to_f32(f32_to_bf16(q[size_t(h * c.dim + d)]))) * double(bf16_to_f32(k[size_t(e * c.dim + d)]));
        dot += p;
        mag += std::fabs(p);
      }
      out[size_t(e)] += double(w[size_t(h)]) * std::max(dot, 0.0);
      size[size_t(e)] += std::fabs(double(w[size_t(h)])) * mag;
    }
  return out;
}

// The keys' rows in reverse order in memory, as gathered from scattered cache blocks: key e at keys[e].
std::vector<float> scores(const std::vector<float>& q, const std::vector<float>& w, const uint16_t* keys, const Case& c) {
  std::vector<uint16_t> reversed(size_t(c.keys * c.dim));
  std::vector<const uint16_t*> rows(size_t(c.keys));
  for (int e = 0; e < c.keys; ++e) {
    uint16_t* row = reversed.data() + size_t(c.keys - 1 - e) * size_t(c.dim);
    std::copy_n(keys + size_t(e) * size_t(c.dim), c.dim, row);
    rows[size_t(e)] = row;
  }
  std::vector<float> out(size_t(c.keys), -1.0f);
  cpu::indexer_scores({q.data(), w.data(), rows.data(), out.data(), c.heads, c.dim, c.keys});
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
// register group, fewer keys than a register tile, and DeepSeek-V4's 64 heads of 128 over 1000 keys.
TEST_P(IndexerScores, MatchesTheFormulaInDouble) {
  for (const Case& c : {Case{1, 1, 1}, Case{3, 7, 5}, Case{16, 64, 11}, Case{5, 33, 3}, Case{64, 128, 1000}}) {
    const std::vector<float> q = random_floats(size_t(c.heads * c.dim), 1), w = random_floats(size_t(c.heads), 2);
    const std::vector<uint16_t> k = bf16_keys(c, 3);
    std::vector<double> size;
    const std::vector<double> want = reference(q, w, k, c, size);
    const std::vector<float> got = scores(q, w, k.data(), c);
    // Each dot's sum rounds at most dim times and the weighted sum over the heads at most 2 x heads
    // times, each by at most 2^-24 of a partial sum no larger than the size.
    for (int e = 0; e < c.keys; ++e)
      ASSERT_NEAR(got[size_t(e)], want[size_t(e)], (c.dim + 2 * c.heads) * 0x1p-24 * size[size_t(e)] + 1e-30)
          << c.heads << " heads x " << c.dim << " over " << c.keys << " keys, key " << e;
  }
}

// Head 0's dot is negative and head 1's positive: relu drops head 0 however large its weight.
TEST_P(IndexerScores, ReluDropsANegativeHeadBeforeItsWeight) {
  const Case c{2, 2, 1};
  const std::vector<float> q = {-1.0f, 0.0f, 0.5f, 0.25f}, w = {100.0f, 2.0f};
  const std::vector<uint16_t> k = {f32_to_bf16(3.0f), f32_to_bf16(4.0f)};
  EXPECT_EQ(scores(q, w, k.data(), c)[0], 2.0f * (0.5f * 3.0f + 0.25f * 4.0f));
}

// Each key's bits: the same with the other keys, alone, on one or two threads, and when the call
// runs inside a parallel region (as the models call it, one row per thread).
TEST_P(IndexerScores, EachKeyIsBitwiseTheSameHoweverItIsRun) {
  const Case c{64, 128, 301};
  const std::vector<float> q = random_floats(size_t(c.heads * c.dim), 4), w = random_floats(size_t(c.heads), 5);
  const std::vector<uint16_t> k = bf16_keys(c, 6);
  std::vector<float> all;
  {
    ThreadScope t(2);
    all = scores(q, w, k.data(), c);
  }
  ThreadScope t(1);
  for (int e = 0; e < c.keys; e += 37) {
    const std::vector<float> alone = scores(q, w, k.data() + e * c.dim, Case{c.heads, c.dim, 1});
    ASSERT_EQ(std::memcmp(alone.data(), all.data() + e, 4), 0) << "key " << e;
  }
  std::vector<std::vector<float>> nested(4);
  {
    ThreadScope two(2);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < 4; ++i) nested[size_t(i)] = scores(q, w, k.data(), c);
  }
  for (const std::vector<float>& n : nested) ASSERT_EQ(std::memcmp(n.data(), all.data(), all.size() * 4), 0);
}

INSTANTIATE_TEST_SUITE_P(Isas, IndexerScores, ::testing::ValuesIn(kAllIsas),
                         [](const auto& info) { return isa_test_name(info.param); });

}  // namespace
}  // namespace deepinfer::test
