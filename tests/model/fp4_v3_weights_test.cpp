// FP4 linears in a DeepSeek-V3 checkpoint (the layout DeepSeek-V4 ships its experts in): bound
// packed, and the model's logits bitwise those of the same checkpoint with the weights written
// as bf16, expanded by numpy per the shared fixtures' README (tests/model/make_fp4_v3_fixture.py
// wrote both folders); broken FP4 tensors fail with the file and the tensor named.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "kernels/cpu/isa.h"
#include "model/deepseek/model.h"
#include "safetensors_writer.h"

namespace deepinfer {
namespace {

const std::string kFp4 = "tests/data/models/tiny-v3-fp4";
const std::string kBf16 = "tests/data/models/tiny-v3-fp4-bf16";

std::unique_ptr<DeepseekModel> load(const std::string& dir, DType activations) {
  ModelOptions o;
  o.activation_dtype = activations;
  auto m = DeepseekModel::Load(dir, o, cpu_backend());
  EXPECT_TRUE(m.ok()) << m.status().message();
  return m.ok() ? std::move(*m) : nullptr;
}

// Two sequences: their prompts (19 and 7 tokens) in one step, then two generated tokens each,
// one step apiece; the logits of every row of every step, in order.
std::vector<float> logits_of_every_row(DeepseekModel& m) {
  const int vocab = m.info().vocab_size, block_size = 16;
  auto kinds = m.kv_kinds(DType::BF16, block_size);
  EXPECT_TRUE(kinds.ok());
  KvCacheView view;
  view.dtype = DType::BF16;
  view.block_size = block_size;
  KvKindView latent{4, (*kinds)[0].bytes_per_block, {}};
  std::vector<std::vector<uint8_t>> slabs;
  for (int l = 0; l < (*kinds)[0].n_slabs; ++l) slabs.emplace_back(size_t(latent.n_blocks) * latent.bytes_per_block);
  for (auto& s : slabs) latent.slab_base.push_back(s.data());
  view.kinds.push_back(std::move(latent));
  std::vector<std::vector<int32_t>> tables = {{0, 2}, {1, 3}};
  const std::vector<std::vector<int32_t>> tokens = {
      {3, 200, 17, 45, 99, 120, 7, 8, 250, 33, 61, 140, 12, 5, 77, 180, 2, 90, 101, 64, 131},
      {9, 44, 210, 37, 150, 6, 71, 23, 199}};
  const std::vector<int> n_prompt = {19, 7};
  std::vector<int> done = {0, 0};
  std::vector<float> out;
  for (int step = 0; step < 3; ++step) {
    ForwardBatch b;
    for (size_t s = 0; s < tokens.size(); ++s) {
      const int n = step == 0 ? n_prompt[s] : 1;
      b.seqs.push_back({int32_t(b.n_rows()), n, done[s] + n, {tables[s].data()}});
      for (int i = 0; i < n; ++i) {
        b.token_ids.push_back(tokens[s][size_t(done[s] + i)]);
        b.positions.push_back(done[s] + i);
        b.prompt_rows.push_back(step == 0 ? 1 : 0);
        b.logit_rows.push_back(int32_t(b.n_rows()) - 1);
      }
      done[s] += n;
    }
    std::vector<float> logits(b.logit_rows.size() * size_t(vocab));
    m.forward(b, view, logits.data());
    out.insert(out.end(), logits.begin(), logits.end());
  }
  return out;
}

TEST(Fp4V3Weights, LinearsStayPackedBesideBf16Ones) {
  auto fp4 = load(kFp4, DType::F32), bf16 = load(kBf16, DType::F32);
  ASSERT_TRUE(fp4 && bf16);
  const LayerWeights& L = fp4->weights().layers[1];
  for (const LinearWeight* w : {&L.moe.experts[3].down, &L.moe.experts[0].gate, &L.moe.shared.up, &L.attn.o_proj,
                                &fp4->weights().layers[0].mlp.gate, &fp4->weights().lm_head}) {
    EXPECT_EQ(w->dtype, DType::F4_E2M1);
    EXPECT_NE(w->scale_e8m0, nullptr);
  }
  // The embedding, the router and kv_b_proj stay as stored (the script leaves them bf16).
  for (const LinearWeight* w : {&fp4->weights().embed, &L.moe.router, &L.attn.kv_b_proj}) EXPECT_EQ(w->dtype, DType::BF16);
  EXPECT_EQ(fp4->info().n_params, bf16->info().n_params);
  EXPECT_LT(fp4->info().n_weight_bytes, bf16->info().n_weight_bytes / 2);
}

TEST(Fp4V3Weights, LogitsBitwiseTheBf16Expansion) {
  const cpu::Isa saved = cpu::active_isa();
  for (int level = 0; level <= int(cpu::Isa::kAmx); ++level) {
    if (!cpu::set_active_isa(cpu::Isa(level))) continue;  // not on this CPU
    for (DType act : {DType::F32, DType::BF16}) {
      SCOPED_TRACE(std::string(cpu::isa_name(cpu::Isa(level))) + (act == DType::BF16 ? ", bf16" : ", f32") +
                   " activations");
      auto fp4 = load(kFp4, act), bf16 = load(kBf16, act);
      ASSERT_TRUE(fp4 && bf16);
      EXPECT_EQ(fp4->weights().layers[1].moe.experts[2].up.act_dtype, act);
      const std::vector<float> a = logits_of_every_row(*fp4), b = logits_of_every_row(*bf16);
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
      float spread = 0;  // the logits are not degenerate
      for (size_t i = 1; i < a.size(); ++i) spread = std::max(spread, std::abs(a[i] - a[0]));
      EXPECT_GT(spread, 0.01f);
    }
  }
  cpu::set_active_isa(saved);
}

// The fixture's safetensors with its header changed by `edit` (data bytes by `poke`), loaded.
std::string load_error(const std::function<void(nlohmann::json&)>& edit,
                       const std::function<void(const nlohmann::json&, std::string&)>& poke = nullptr) {
  std::string bytes = read_text_file(kFp4 + "/model.safetensors").value();
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[size_t(i)])) << (8 * i);
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  std::string data = bytes.substr(8 + n);
  edit(header);
  if (poke) poke(header, data);
  testing::TempDir dir("fp4-v3");
  testing::write_file(dir.path() / "config.json", read_text_file(kFp4 + "/config.json").value());
  testing::write_file(dir.path() / "model.safetensors", testing::safetensors_image(header.dump(), data));
  auto m = DeepseekModel::Load(dir.path().string(), ModelOptions{}, cpu_backend());
  EXPECT_FALSE(m.ok());
  return m.ok() ? "" : m.status().message();
}

const std::string kDown = "model.layers.1.mlp.experts.3.down_proj";

TEST(Fp4V3Weights, WrongShapeIsNamed) {
  const std::string e = load_error([](nlohmann::json& h) { h[kDown + ".weight"]["shape"] = {32, 32}; });
  EXPECT_NE(e.find("model.safetensors: tensor '" + kDown + ".weight' (I8, FP4 packed two per byte) has shape [32, 32], "
                   "expected [64, 16]"),
            std::string::npos)
      << e;
}

TEST(Fp4V3Weights, MissingScaleIsNamed) {
  const std::string e = load_error([](nlohmann::json& h) {
    h[kDown + ".scales"] = h[kDown + ".scale"];
    h.erase(kDown + ".scale");
  });
  EXPECT_NE(e.find("tensor '" + kDown + ".scale' is missing from the checkpoint (the F8_E8M0 scales of the FP4 weight '" +
                   kDown + ".weight' in "),
            std::string::npos)
      << e;
}

TEST(Fp4V3Weights, ScaleOfAnotherDtypeIsNamed) {
  const std::string e = load_error([](nlohmann::json& h) { h[kDown + ".scale"]["dtype"] = "I8"; });
  EXPECT_NE(e.find("model.safetensors: tensor '" + kDown + ".scale' must be F8_E8M0, is I8"), std::string::npos) << e;
}

TEST(Fp4V3Weights, NanScaleByteIsNamedWithItsPlace) {
  const std::string e = load_error([](nlohmann::json&) {},
                                   [](const nlohmann::json& h, std::string& data) {
                                     const auto& s = h[kDown + ".scale"];
                                     const int64_t cols = s["shape"][1].get<int64_t>();
                                     data[size_t(s["data_offsets"][0].get<int64_t>() + 5 * cols + 0)] = char(0xff);
                                   });
  EXPECT_NE(e.find("model.safetensors: tensor '" + kDown + ".scale' holds the NaN scale 0xff at [5, 0]"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace deepinfer
