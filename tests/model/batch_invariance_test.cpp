// Batch invariance of the model forward pass: a sequence's logits are bitwise identical whether
// it runs alone or beside others, whole or in chunks of any size, for every cache dtype, with
// its tokens' provenance (prompt rows expanded, generated rows absorbed) held fixed; a chunk may
// hold both (a preempted sequence recomputing its generated tokens).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "model/deepseek/model.h"

namespace deepinfer {
namespace {

// A paged cache with a fixed block assignment per sequence (distinct blocks per sequence).
struct TestCache {
  KvCacheView view;
  std::vector<std::vector<uint8_t>> storage;
  std::vector<std::vector<int32_t>> tables;

  TestCache(const CausalLM& model, DType dtype, int block_size, int n_seqs, int max_len) {
    auto kinds = model.kv_kinds(dtype, block_size);
    EXPECT_TRUE(kinds.ok() && kinds->size() == 1);
    view.dtype = dtype;
    view.block_size = block_size;
    const int per_seq = (max_len + block_size - 1) / block_size;
    KvKindView latent{per_seq * n_seqs, (*kinds)[0].bytes_per_block, {}};
    for (int l = 0; l < (*kinds)[0].n_slabs; ++l) storage.emplace_back(size_t(latent.n_blocks) * latent.bytes_per_block);
    for (auto& s : storage) latent.slab_base.push_back(s.data());
    view.kinds.push_back(std::move(latent));
    // Interleave block ids across sequences so tables are not contiguous ranges.
    tables.resize(size_t(n_seqs));
    for (int b = 0; b < per_seq; ++b)
      for (int s = 0; s < n_seqs; ++s) tables[size_t(s)].push_back(b * n_seqs + (n_seqs - 1 - s));
  }
};

std::vector<int32_t> prompt(int n, int salt) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back((i * 37 + salt * 101 + 5) % 1000 + 2);
  return ids;
}

// Runs the sequences' tokens through the model in chunks of `chunk` tokens, all sequences
// sharing each step, the first n_prompt[s] tokens of sequence s as prompt rows and the rest as
// generated rows; returns each sequence's logits after its last token.
std::vector<std::vector<float>> run(DeepseekModel& m, const std::vector<std::vector<int32_t>>& prompts, int chunk,
                                    DType dtype, const std::vector<int>& n_prompt) {
  const int vocab = m.info().vocab_size;
  TestCache cache(m, dtype, 16, int(prompts.size()), 256);
  std::vector<std::vector<float>> last(prompts.size(), std::vector<float>(size_t(vocab)));
  std::vector<int> done(prompts.size(), 0);
  for (bool any = true; any;) {
    ForwardBatch b;
    std::vector<size_t> owners;
    for (size_t s = 0; s < prompts.size(); ++s) {
      const int n = std::min<int>(chunk, int(prompts[s].size()) - done[s]);
      if (n <= 0) continue;
      BatchSequence bs{int32_t(b.n_rows()), n, done[s] + n, {cache.tables[s].data()}};
      for (int i = 0; i < n; ++i) {
        b.token_ids.push_back(prompts[s][size_t(done[s] + i)]);
        b.positions.push_back(done[s] + i);
        b.prompt_rows.push_back(done[s] + i < n_prompt[s] ? 1 : 0);
      }
      b.seqs.push_back(bs);
      done[s] += n;
      if (done[s] == int(prompts[s].size())) {
        b.logit_rows.push_back(int32_t(b.n_rows()) - 1);
        owners.push_back(s);
      }
    }
    any = !b.seqs.empty();
    if (!any) break;
    std::vector<float> logits(b.logit_rows.size() * size_t(vocab));
    m.forward(b, cache.view, logits.data());
    for (size_t i = 0; i < owners.size(); ++i)
      std::memcpy(last[owners[i]].data(), logits.data() + i * size_t(vocab), size_t(vocab) * 4);
  }
  return last;
}

// (KV cache dtype, activation dtype)
class BatchInvariance : public ::testing::TestWithParam<std::pair<DType, DType>> {};

TEST_P(BatchInvariance, AloneTogetherAndChunkedAreBitwiseEqual) {
  const auto [kv_dtype, act_dtype] = GetParam();
  auto m = DeepseekModel::Load("tests/data/models/tiny-v3", ModelOptions{act_dtype}, cpu_backend());
  ASSERT_TRUE(m.ok()) << m.status().message();
  const std::vector<std::vector<int32_t>> prompts = {prompt(40, 1), prompt(7, 2), prompt(129, 3), prompt(1, 4)};
  // All prompt; then the last tokens generated (prompts of 37, 5, 100 and 1 tokens).
  for (const std::vector<int>& n_prompt : {std::vector<int>{40, 7, 129, 1}, std::vector<int>{37, 5, 100, 1}}) {
    std::vector<std::vector<float>> alone;
    for (size_t s = 0; s < prompts.size(); ++s)
      alone.push_back(run(**m, {prompts[s]}, 1 << 20, kv_dtype, {n_prompt[s]})[0]);
    for (int chunk : {1, 7, 64, 1 << 20}) {
      const auto together = run(**m, prompts, chunk, kv_dtype, n_prompt);
      for (size_t s = 0; s < prompts.size(); ++s)
        EXPECT_EQ(std::memcmp(together[s].data(), alone[s].data(), alone[s].size() * 4), 0)
            << "sequence " << s << ", chunk " << chunk << ", prompt " << n_prompt[s] << " tokens";
    }
  }
}

// Prompt rows really take the expanded formulation: other bits than generated rows, the same
// logits within f32 rounding (bf16 activations: within bf16 rounding; an fp8 cache turns the
// formulations' last-bit differences into a few latents quantized one e4m3 step apart).
TEST_P(BatchInvariance, ExpandedPromptRowsAgreeWithAbsorbedOnes) {
  const auto [kv_dtype, act_dtype] = GetParam();
  auto m = DeepseekModel::Load("tests/data/models/tiny-v3", ModelOptions{act_dtype}, cpu_backend());
  ASSERT_TRUE(m.ok()) << m.status().message();
  const std::vector<int32_t> p = prompt(129, 3);
  const std::vector<float> expanded = run(**m, {p}, 64, kv_dtype, {129})[0];
  const std::vector<float> absorbed = run(**m, {p}, 64, kv_dtype, {0})[0];
  EXPECT_NE(std::memcmp(expanded.data(), absorbed.data(), expanded.size() * 4), 0);
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < expanded.size(); ++i) {
    max_diff = std::max(max_diff, double(std::fabs(expanded[i] - absorbed[i])));
    max_abs = std::max(max_abs, double(std::fabs(absorbed[i])));
  }
  const double tol = act_dtype == DType::BF16 ? 3e-2 : kv_dtype == DType::F8_E4M3 ? 1e-2 : 1e-4;
  EXPECT_LT(max_diff, tol * max_abs) << "largest logit " << max_abs;
}

// Weights the backend relays at load (fp8 and FP4 tile-major where they run on AMX tiles) give
// every sequence the bits of the weights as stored: prompt and generated rows, decode steps (one
// token tile) and chunks of 64 (several). Skipped where the CPU level keeps them as stored.
std::vector<std::vector<std::vector<float>>> relaid_and_stored(const std::string& dir,
                                                               const std::function<bool(const DeepseekWeights&)>& relaid) {
  ModelOptions with, without;
  with.activation_dtype = without.activation_dtype = DType::BF16;
  without.relay_weights = false;
  auto a = DeepseekModel::Load(dir, with, cpu_backend());
  auto b = DeepseekModel::Load(dir, without, cpu_backend());
  EXPECT_TRUE(a.ok() && b.ok());
  if (!a.ok() || !b.ok()) return {};
  EXPECT_FALSE(relaid((*b)->weights()));
  EXPECT_EQ((*b)->info().n_relaid_bytes, 0u);
  if (!relaid((*a)->weights())) return {};
  EXPECT_GT((*a)->info().n_relaid_bytes, 0u);
  std::vector<std::vector<int32_t>> prompts = {prompt(40, 1), prompt(7, 2), prompt(129, 3), prompt(1, 4)};
  for (std::vector<int32_t>& p : prompts)
    for (int32_t& id : p) id %= (*a)->info().vocab_size;
  const std::vector<int> n_prompt = {30, 5, 100, 1};
  std::vector<std::vector<std::vector<float>>> out;
  for (int chunk : {1, 64})
    for (DeepseekModel* m : {a->get(), b->get()}) out.push_back(run(*m, prompts, chunk, DType::BF16, n_prompt));
  return out;
}

void expect_pairs_equal(const std::vector<std::vector<std::vector<float>>>& runs) {
  for (size_t i = 0; i + 1 < runs.size(); i += 2)
    for (size_t s = 0; s < runs[i].size(); ++s)
      EXPECT_EQ(std::memcmp(runs[i][s].data(), runs[i + 1][s].data(), runs[i][s].size() * 4), 0)
          << "sequence " << s << ", chunk " << (i == 0 ? 1 : 64);
}

TEST(RelaidWeights, Fp8GiveTheStoredWeightsBits) {
  const auto runs = relaid_and_stored("tests/data/models/tiny-v3-fp8", [](const DeepseekWeights& w) {
    const bool relaid = w.layers[0].attn.o_proj.tile_major;
    if (relaid) {
      for (const LinearWeight* lw : {&w.layers[0].mlp.down, &w.layers[1].moe.experts[5].up, &w.layers[1].moe.shared.gate,
                                     &w.layers[2].attn.q_b_proj})
        EXPECT_TRUE(lw->tile_major);
      EXPECT_FALSE(w.layers[0].attn.kv_b_proj.tile_major);  // absorbed into attention: rows as stored
    }
    return relaid;
  });
  if (runs.empty()) GTEST_SKIP() << "this CPU level keeps fp8 weights as stored";
  expect_pairs_equal(runs);
}

TEST(RelaidWeights, Fp4ExpertsGiveTheStoredWeightsBits) {
  const auto runs = relaid_and_stored("tests/data/models/tiny-v3-fp4", [](const DeepseekWeights& w) {
    const LinearWeight& e = w.layers[1].moe.experts[5].up;
    EXPECT_EQ(e.dtype, DType::F4_E2M1);
    return e.tile_major;
  });
  if (runs.empty()) GTEST_SKIP() << "this CPU level keeps FP4 weights as stored";
  expect_pairs_equal(runs);
}

INSTANTIATE_TEST_SUITE_P(CacheAndActivationDtypes, BatchInvariance,
                         ::testing::Values(std::pair{DType::F32, DType::F32}, std::pair{DType::BF16, DType::F32},
                                           std::pair{DType::F8_E4M3, DType::F32}, std::pair{DType::BF16, DType::BF16}),
                         [](const auto& info) {
                           return "kv_" + std::string(dtype_name(info.param.first)) + "_activations_" +
                                  std::string(dtype_name(info.param.second));
                         });

}  // namespace
}  // namespace deepinfer
