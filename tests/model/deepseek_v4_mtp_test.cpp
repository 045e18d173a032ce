// DeepSeek-V4's MTP block against the fixtures' golden_mtp.json. tests/data/models/tiny-v4 and
// tiny-v4-fp8 are copies of ../shared/fixtures; golden_mtp.json comes from DeepSeek's V4-Flash
// inference/model.py MTPBlock (release 0825add, float32, weights dequantized exactly, no
// quantization simulation): the main model over s = prompt_ids + output_ids of each golden.json
// case with its last block's streams hooked, then the MTP block over every position t, predicting
// s[t+2] from h_t and s[t+1]. Every position of every case: the top-1 id equal (at positions the
// golden marks "ambiguous", near ties, either of its two best ids), the target's logprob and the
// top-5 logprobs (rank by rank) within 1e-3.
#include <algorithm>
#include <array>
#include <functional>
#include <cmath>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <omp.h>

#include "model/deepseek_v4/mtp_block.h"
#include "model/loader.h"

namespace deepinfer {
namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return nlohmann::json::parse(ss.str());
}

std::unique_ptr<DeepseekV4Model> load_v4(const std::string& name, const ModelOptions& options = {}) {
  auto m = load_causal_lm("tests/data/models/" + name, options);
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return nullptr;
  return std::unique_ptr<DeepseekV4Model>(static_cast<DeepseekV4Model*>(std::move(m).value().release()));
}

struct MtpGoldenResult {
  int n_positions = 0;
  int n_wrong_top1 = 0;
  double max_error = 0;  // largest |logprob - golden| over the target and the top 5, rank by rank
};

MtpGoldenResult compare(DeepseekV4Model& m, const std::string& name) {
  const nlohmann::json g = read_json("tests/data/models/" + name + "/golden_mtp.json");
  const int vocab = m.info().vocab_size;
  MtpGoldenResult res;
  for (const auto& c : g["cases"]) {
    std::vector<int32_t> s = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto out = c["output_ids"].get<std::vector<int32_t>>();
    s.insert(s.end(), out.begin(), out.end());
    auto logits = v4_mtp_probe_logits(m, s);
    EXPECT_TRUE(logits.ok()) << logits.status().message();
    if (!logits.ok()) return res;
    EXPECT_EQ(c["positions"].size(), s.size() - 1);
    for (const auto& p : c["positions"]) {
      const int t = p["t"].get<int>();
      const float* l = logits->data() + size_t(t) * size_t(vocab);
      std::vector<double> lp(l, l + vocab);
      const double mx = *std::max_element(lp.begin(), lp.end());
      double sum = 0;
      for (double v : lp) sum += std::exp(v - mx);
      for (double& v : lp) v -= mx + std::log(sum);
      std::vector<int> order(static_cast<size_t>(vocab));
      for (int v = 0; v < vocab; ++v) order[size_t(v)] = v;
      std::partial_sort(order.begin(), order.begin() + 5, order.end(), [&](int a, int b) { return lp[size_t(a)] > lp[size_t(b)]; });
      const auto& top5 = p["top5"];
      const bool top1_ok = order[0] == top5[0][0].get<int>() ||
                           (p["ambiguous"].get<bool>() && order[0] == top5[1][0].get<int>());
      res.n_wrong_top1 += !top1_ok;
      for (int i = 0; i < 5; ++i)
        res.max_error = std::max(res.max_error, std::fabs(lp[size_t(order[size_t(i)])] - top5[i][1].get<double>()));
      EXPECT_EQ(p["target_id"].is_null(), t == int(s.size()) - 2);
      if (!p["target_id"].is_null())
        res.max_error = std::max(res.max_error, std::fabs(lp[size_t(s[size_t(t) + 2])] - p["target_logprob"].get<double>()));
      ++res.n_positions;
    }
  }
  return res;
}

// One OpenMP thread: on a shared test machine the kernels' per-op barriers dominate the tiny
// fixture's arithmetic (results do not depend on the thread count).
class DeepseekV4Mtp : public ::testing::Test {
 protected:
  void SetUp() override { omp_set_num_threads(1); }
};

TEST_F(DeepseekV4Mtp, MatchesModelPyOnTinyV4) {
  auto m = load_v4("tiny-v4");
  ASSERT_TRUE(m);
  const MtpGoldenResult r = compare(*m, "tiny-v4");
  EXPECT_EQ(r.n_positions, 267);
  EXPECT_EQ(r.n_wrong_top1, 0);
  EXPECT_LT(r.max_error, 1e-3);
  std::printf("tiny-v4: %d positions, max logprob error %.2e\n", r.n_positions, r.max_error);
}

TEST_F(DeepseekV4Mtp, MatchesModelPyOnTinyV4Fp8) {
  auto m = load_v4("tiny-v4-fp8");
  ASSERT_TRUE(m);
  const MtpGoldenResult r = compare(*m, "tiny-v4-fp8");
  EXPECT_EQ(r.n_positions, 267);
  EXPECT_EQ(r.n_wrong_top1, 0);
  EXPECT_LT(r.max_error, 1e-3);
  std::printf("tiny-v4-fp8: %d positions, max logprob error %.2e\n", r.n_positions, r.max_error);
}

// Position t reads only h_0..h_t and s[1..t+1]: a prefix of the ids gives the same rows.
TEST_F(DeepseekV4Mtp, APrefixGivesTheSameRows) {
  auto m = load_v4("tiny-v4");
  ASSERT_TRUE(m);
  std::vector<int32_t> ids;
  for (int i = 0; i < 40; ++i) ids.push_back(int32_t((i * 37 + 11) % 1024));
  auto full = v4_mtp_probe_logits(*m, ids);
  ASSERT_TRUE(full.ok());
  auto prefix = v4_mtp_probe_logits(*m, std::vector<int32_t>(ids.begin(), ids.begin() + 25));
  ASSERT_TRUE(prefix.ok());
  ASSERT_EQ(prefix->size(), size_t(24) * 1024);
  for (size_t i = 0; i < prefix->size(); ++i) ASSERT_EQ((*prefix)[i], (*full)[i]) << i;
}

TEST_F(DeepseekV4Mtp, BadIdsAreErrors) {
  auto m = load_v4("tiny-v4");
  ASSERT_TRUE(m);
  auto one = v4_mtp_probe_logits(*m, {5});
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.status().message().find("at least 2 token ids"), std::string::npos);
  auto outside = v4_mtp_probe_logits(*m, {5, 1024});
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.status().message().find("token id 1024 is outside the vocabulary [0, 1024)"), std::string::npos);
}

// The engine's path: the model loaded for drafting runs a sequence through its own cache kinds in
// chunks of 3 (f32 cache), keeping the MTP block's K=V at positions shifted by one and the
// last block's streams; then one draft() call with a query at every position q (token ids[q])
// must give the argmax of the probe's row q - 1 (the same prediction, unshifted), wherever the
// probe's two best logits are apart by more than 1e-3 (the shift is exact up to rounding). A
// chained query's first draft is the single draft at its position.
TEST_F(DeepseekV4Mtp, EngineDraftsFromTheCacheAreTheProbesPredictions) {
  ModelOptions options;
  options.mtp_drafting = true;
  for (const std::string name : {"tiny-v4", "tiny-v4-fp8"}) {
    auto m = load_v4(name, options);
    ASSERT_TRUE(m && m->can_draft());
    const int vocab = m->info().vocab_size, L = 40, block_size = 16;
    std::vector<int32_t> ids;
    for (int i = 0; i < L; ++i) ids.push_back(int32_t((i * 37 + 11) % vocab));
    auto probe = v4_mtp_probe_logits(*m, ids);
    ASSERT_TRUE(probe.ok());

    auto kinds = m->kv_kinds(DType::F32, block_size);
    ASSERT_TRUE(kinds.ok());
    const int n_blocks = (L + block_size - 1) / block_size;
    std::vector<int32_t> table(static_cast<size_t>(n_blocks));
    for (int i = 0; i < n_blocks; ++i) table[size_t(i)] = i;
    std::vector<std::vector<uint8_t>> memory;
    KvCacheView view{DType::F32, block_size, {}};
    std::array<const int32_t*, kMaxKvKinds> tables{};
    for (size_t k = 0; k < kinds->size(); ++k) {
      KvKindView& v = view.kinds.emplace_back();
      v.n_blocks = n_blocks;
      v.bytes_per_block = (*kinds)[k].bytes_per_block;
      v.slab_base.push_back(memory.emplace_back((*kinds)[k].bytes_per_block * size_t(n_blocks)).data());
      tables[k] = table.data();
    }
    std::vector<float> logits(static_cast<size_t>(vocab));
    for (int begin = 0; begin < L - 1; begin += 3) {  // positions [0, L - 1) into the cache
      const int end = std::min(L - 1, begin + 3);
      ForwardBatch b;
      b.seqs = {BatchSequence{0, end - begin, end, tables}};
      for (int p = begin; p < end; ++p) {
        b.token_ids.push_back(ids[size_t(p)]);
        b.positions.push_back(p);
      }
      b.logit_rows = {end - begin - 1};
      m->forward(b, view, logits.data());
    }
    std::vector<DraftQuery> queries;
    for (int q = 1; q < L; ++q) queries.push_back({q, ids[size_t(q)], 1, tables});
    for (int q : {1, 9, 20, 39}) queries.push_back({q, ids[size_t(q)], 4, tables});
    std::vector<int32_t> drafts(size_t(L - 1) + 16);
    m->draft(queries, view, drafts.data());
    int n_checked = 0;
    for (int q = 1; q < L; ++q) {
      const float* row = probe->data() + size_t(q - 1) * size_t(vocab);
      std::vector<float> sorted(row, row + vocab);
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
      if (sorted[0] - sorted[1] <= 1e-3f) continue;
      EXPECT_EQ(drafts[size_t(q - 1)], int32_t(std::max_element(row, row + vocab) - row)) << name << " q " << q;
      ++n_checked;
    }
    EXPECT_GT(n_checked, 30) << name;
    const int chained[] = {1, 9, 20, 39};
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(drafts[size_t(L - 1 + 4 * i)], drafts[size_t(chained[i] - 1)]) << name << " chained at " << chained[i];
    std::printf("%s: %d of %d engine drafts checked against the probe\n", name.c_str(), n_checked, L - 1);
  }
}

}  // namespace
}  // namespace deepinfer
