// DeepSeek-V3's MTP layer (DeepseekModel loaded with ModelOptions::mtp_drafting) against
// tests/data/models/tiny-v3-mtp/golden_mtp.json, written by tests/model/deepseek_mtp_reference.py:
// a float64 numpy reference of the published math (DeepSeek-V3 technical report section 2.2, as
// vLLM's deepseek_mtp.py and SGLang's deepseek_nextn.py run it; its main model checked against
// DeepSeek's own outputs on the tiny-v3 fixture). Every position of every case through the
// drafting path (deepseek_mtp_probe_logits: forward keeps the MTP kinds, draft_logits reads them):
// the top-1 id equal (near ties, margin < 1e-3: either of the two best), the top 5 and the
// target's logprob within 1e-3. Drafts read from a cache filled step by step, in chunks, or
// started from another sequence's blocks (a prefix-cache hit), equal the probe's argmax at every
// position; 3 chained drafts from every position equal the reference's
// chain (vLLM's: the layer's own output before shared_head.norm and the draft make the next pair),
// up to the first near tie; a checkpoint without an MTP layer refuses drafting.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <omp.h>

#include "model/deepseek/model.h"
#include "model/loader.h"

namespace deepinfer {
namespace {

const char* kModel = "tests/data/models/tiny-v3-mtp";

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return nlohmann::json::parse(ss.str());
}

std::unique_ptr<DeepseekModel> load_v3(const std::string& dir, bool drafting) {
  ModelOptions o;
  o.mtp_drafting = drafting;
  auto m = load_causal_lm(dir, o);
  EXPECT_TRUE(m.ok()) << m.status().message();
  if (!m.ok()) return nullptr;
  return std::unique_ptr<DeepseekModel>(static_cast<DeepseekModel*>(std::move(m).value().release()));
}

std::vector<double> log_softmax(const float* logits, int vocab) {
  const double top = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(double(logits[i]) - top);
  std::vector<double> out(static_cast<size_t>(vocab));
  for (int i = 0; i < vocab; ++i) out[size_t(i)] = double(logits[i]) - top - std::log(sum);
  return out;
}

TEST(DeepseekMtp, LayerMatchesTheReferenceAtEveryPosition) {
  omp_set_num_threads(1);
  const auto m = load_v3(kModel, true);
  ASSERT_TRUE(m && m->can_draft());
  const nlohmann::json g = read_json(std::string(kModel) + "/golden_mtp.json");
  const int vocab = m->info().vocab_size;
  int n_positions = 0;
  double max_error = 0;
  for (const auto& c : g["cases"]) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    auto logits = deepseek_mtp_probe_logits(*m, ids);
    ASSERT_TRUE(logits.ok()) << logits.status().message();
    ASSERT_EQ(c["positions"].size(), ids.size() - 1);
    for (const auto& p : c["positions"]) {
      const int t = p["t"].get<int>();
      const float* row = logits->data() + size_t(t) * size_t(vocab);
      const auto lp = log_softmax(row, vocab);
      const auto top5 = p["top5"];
      const int32_t best = int32_t(std::max_element(row, row + vocab) - row);
      if (p["margin"].get<double>() >= 1e-3) EXPECT_EQ(best, top5[0][0].get<int32_t>()) << "t " << t;
      else EXPECT_TRUE(best == top5[0][0].get<int32_t>() || best == top5[1][0].get<int32_t>()) << "t " << t;
      for (const auto& e : top5)
        max_error = std::max(max_error, std::abs(lp[e[0].get<size_t>()] - e[1].get<double>()));
      if (!p["target_logprob"].is_null())
        max_error = std::max(max_error, std::abs(lp[size_t(ids[size_t(t) + 2])] - p["target_logprob"].get<double>()));
      ++n_positions;
    }
  }
  std::printf("tiny-v3-mtp: %d positions, max |logprob - reference| %.2e\n", n_positions, max_error);
  EXPECT_EQ(n_positions, 122);
  EXPECT_LT(max_error, 1e-3);
}

// One sequence run step by step in chunks of `chunk` rows through a private cache (block size
// 8, so chunks and blocks cut each other anywhere); after each step, draft() from the cache for
// the next positions. With shared_blocks > 0, another sequence computes the first shared_blocks
// blocks of the same ids first, and this one starts from them (its block tables point at that
// sequence's blocks, in every kind, as a prefix-cache hit gives) at position shared_blocks * 8.
// Returns drafts[(t - first) * n_drafts + j]: draft j after computing positions [0, t], token
// ids[t+1], for t from the first position computed.
std::vector<int32_t> drafts_through_the_cache(DeepseekModel& m, const std::vector<int32_t>& ids, int chunk, DType dtype,
                                              int n_drafts = 1, int shared_blocks = 0) {
  const int block_size = 8, n = int(ids.size()) - 1, first = shared_blocks * block_size;
  auto kinds = m.kv_kinds(dtype, block_size);
  EXPECT_TRUE(kinds.ok());
  const int n_blocks = (n + block_size) / block_size;
  std::vector<std::vector<uint8_t>> memory;
  std::vector<int32_t> other(static_cast<size_t>(n_blocks)), table(static_cast<size_t>(n_blocks));
  for (int i = 0; i < n_blocks; ++i) {
    other[size_t(i)] = i;
    table[size_t(i)] = i < shared_blocks ? i : n_blocks + i;
  }
  KvCacheView view{dtype, block_size, {}};
  std::array<const int32_t*, kMaxKvKinds> tables{}, other_tables{};
  for (size_t k = 0; k < kinds->size(); ++k) {
    KvKindView& v = view.kinds.emplace_back();
    v.n_blocks = 2 * n_blocks;
    v.bytes_per_block = (*kinds)[k].bytes_per_block;
    for (int s = 0; s < (*kinds)[k].n_slabs; ++s)
      v.slab_base.push_back(memory.emplace_back((*kinds)[k].bytes_per_block * size_t(2 * n_blocks)).data());
    tables[k] = table.data();
    other_tables[k] = other.data();
  }
  std::vector<float> logits(size_t(m.info().vocab_size));
  auto forward = [&](const std::array<const int32_t*, kMaxKvKinds>& t, int begin, int end) {
    ForwardBatch b;
    b.seqs = {BatchSequence{0, end - begin, end, t}};
    b.token_ids.assign(ids.begin() + begin, ids.begin() + end);
    for (int p = begin; p < end; ++p) b.positions.push_back(p);
    b.logit_rows = {end - begin - 1};
    m.forward(b, view, logits.data());
  };
  if (first > 0) forward(other_tables, 0, first);
  std::vector<int32_t> drafts;
  for (int begin = first; begin < n;) {
    const int end = std::min(n, begin + chunk);
    forward(tables, begin, end);
    std::vector<DraftQuery> queries;
    for (int t = begin; t < end; ++t) queries.push_back({t + 1, ids[size_t(t) + 1], n_drafts, tables});
    std::vector<int32_t> out(queries.size() * size_t(n_drafts));
    m.draft(queries, view, out.data());
    drafts.insert(drafts.end(), out.begin(), out.end());
    begin = end;
  }
  return drafts;
}

TEST(DeepseekMtp, DraftsFromACacheFilledStepByStepAreTheProbesArgmax) {
  omp_set_num_threads(1);
  const auto m = load_v3(kModel, true);
  ASSERT_TRUE(m);
  const nlohmann::json g = read_json(std::string(kModel) + "/golden_mtp.json");
  const auto ids = g["cases"][3]["ids"].get<std::vector<int32_t>>();  // 70 ids
  auto logits = deepseek_mtp_probe_logits(*m, ids);
  ASSERT_TRUE(logits.ok());
  const int vocab = m->info().vocab_size;
  std::vector<int32_t> argmax;
  for (size_t t = 0; t + 1 < ids.size(); ++t) {
    const float* row = logits->data() + t * size_t(vocab);
    argmax.push_back(int32_t(std::max_element(row, row + vocab) - row));
  }
  for (int chunk : {1, 5, 64}) EXPECT_EQ(drafts_through_the_cache(*m, ids, chunk, DType::F32), argmax) << chunk;
  // From another sequence's first 4 blocks (positions 0 .. 31), as after a prefix-cache hit.
  EXPECT_EQ(drafts_through_the_cache(*m, ids, 5, DType::F32, 1, 4), std::vector<int32_t>(argmax.begin() + 32, argmax.end()));
  // A bf16 cache rounds the entries: the drafts may differ only where the reference is near a tie.
  const auto bf16 = drafts_through_the_cache(*m, ids, 7, DType::BF16);
  int n_same = 0;
  for (size_t t = 0; t < argmax.size(); ++t) n_same += bf16[t] == argmax[t];
  EXPECT_GE(n_same, int(argmax.size()) - 2);
}

TEST(DeepseekMtp, ChainedDraftsMatchTheReference) {
  omp_set_num_threads(1);
  const auto m = load_v3(kModel, true);
  ASSERT_TRUE(m);
  const nlohmann::json g = read_json(std::string(kModel) + "/golden_mtp.json");
  int n_compared = 0;
  for (const auto& c : g["cases"]) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    const auto drafts = drafts_through_the_cache(*m, ids, 16, DType::F32, 3);
    for (const auto& p : c["positions"]) {
      const size_t t = p["t"].get<size_t>();
      for (size_t j = 0; j < 3 && p["chain_margins"][j].get<double>() >= 1e-3; ++j, ++n_compared)
        EXPECT_EQ(drafts[t * 3 + j], p["chain"][j].get<int32_t>()) << "t " << t << " draft " << j;
    }
  }
  EXPECT_GT(n_compared, 3 * 122 - 6);  // all but the few draft steps after a near tie
}

TEST(DeepseekMtp, KindsExistOnlyWhenDraftingAndACheckpointWithoutTheLayerRefuses) {
  const auto plain = load_v3(kModel, false);
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->can_draft());
  EXPECT_EQ(plain->kv_kinds(DType::BF16, 16)->size(), 1u);
  const auto drafting = load_v3(kModel, true);
  ASSERT_TRUE(drafting);
  auto kinds = drafting->kv_kinds(DType::BF16, 16);
  ASSERT_EQ(kinds->size(), 3u);
  EXPECT_EQ((*kinds)[1].name, "mtp_latent");
  EXPECT_EQ((*kinds)[1].lookback, 0);
  EXPECT_EQ((*kinds)[2].name, "mtp_hidden");
  EXPECT_EQ((*kinds)[2].lookback, 1);
  EXPECT_FALSE(deepseek_mtp_probe_logits(*plain, {1, 2, 3}).ok());
  ModelOptions o;
  o.mtp_drafting = true;
  const auto refused = load_causal_lm("tests/data/models/tiny-v3", o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("MTP"), std::string::npos) << refused.status().message();
}

}  // namespace
}  // namespace deepinfer
