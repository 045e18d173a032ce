// Binding checkpoint tensors to the model: the fixtures load, and broken checkpoints fail with
// a message naming the file and the tensor.
#include "model/deepseek/weights.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "model/deepseek/model.h"
#include "model/expert_group.h"
#include "model/safetensors.h"
#include "safetensors_writer.h"

namespace deepinfer {
namespace {

struct FakeTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
};

// A safetensors image of zero-filled tensors.
std::string image_of(const std::vector<FakeTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  size_t offset = 0;
  for (const auto& t : tensors) {
    size_t n = t.dtype == "F8_E4M3" ? 1 : t.dtype == "F32" ? 4 : 2;
    for (int64_t d : t.shape) n *= size_t(d);
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  return testing::safetensors_image(header.dump(), std::string(offset, '\0'));
}

std::string load_error(const std::string& config_fixture, const std::vector<FakeTensor>& tensors) {
  testing::TempDir dir("weights");
  testing::write_file(dir.path() / "config.json",
                      read_text_file("tests/data/models/" + config_fixture + "/config.json").value());
  testing::write_file(dir.path() / "model.safetensors", image_of(tensors));
  auto m = DeepseekModel::Load(dir.path().string(), ModelOptions{}, cpu_backend());
  EXPECT_FALSE(m.ok());
  return m.ok() ? "" : m.status().message();
}

TEST(DeepseekWeights, FixturesLoadWithTheirSizes) {
  for (const char* name : {"tiny-v3", "tiny-v3-fp8", "tiny-v2"}) {
    auto m = DeepseekModel::Load(std::string("tests/data/models/") + name, ModelOptions{}, cpu_backend());
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_GT((*m)->info().n_params, 3'000'000u) << name;
    EXPECT_EQ((*m)->info().n_layers, 3);
    EXPECT_EQ((*m)->weights().layers.size(), 3u);
    EXPECT_TRUE((*m)->weights().layers[1].is_moe);
    EXPECT_EQ((*m)->weights().layers[1].moe.experts.size(), 16u);
  }
  auto fp8 = DeepseekModel::Load("tests/data/models/tiny-v3-fp8", ModelOptions{}, cpu_backend());
  EXPECT_EQ((*fp8)->weights().layers[0].attn.o_proj.dtype, DType::F8_E4M3);
  EXPECT_NE((*fp8)->weights().layers[0].attn.o_proj.scale_inv, nullptr);
}

// bf16 activations go to every bf16 or fp8 (128-column blocks) projection the model runs through
// linear/swiglu/moe, and not to the embedding, the routers or kv_b_proj (absorbed into attention).
TEST(DeepseekWeights, Bf16ActivationsMarkTheBf16AndFp8Projections) {
  auto m = DeepseekModel::Load("tests/data/models/tiny-v3", ModelOptions{DType::BF16}, cpu_backend());
  ASSERT_TRUE(m.ok()) << m.status().message();
  const DeepseekWeights& w = (*m)->weights();
  EXPECT_EQ((*m)->info().activation_dtype, DType::BF16);
  EXPECT_EQ(w.embed.act_dtype, DType::F32);
  EXPECT_EQ(w.lm_head.act_dtype, DType::BF16);
  const LayerWeights& dense = w.layers[0];
  const LayerWeights& moe = w.layers[1];
  for (const LinearWeight* lw : {&dense.attn.q_a_proj, &dense.attn.q_b_proj, &dense.attn.kv_a_proj, &dense.attn.o_proj,
                                 &dense.mlp.gate, &dense.mlp.up, &dense.mlp.down, &moe.moe.experts[3].gate,
                                 &moe.moe.experts[3].down, &moe.moe.shared.up})
    EXPECT_EQ(lw->act_dtype, DType::BF16);
  EXPECT_EQ(dense.attn.kv_b_proj.act_dtype, DType::F32);
  EXPECT_EQ(moe.moe.router.act_dtype, DType::F32);

  auto fp8 = DeepseekModel::Load("tests/data/models/tiny-v3-fp8", ModelOptions{DType::BF16}, cpu_backend());
  ASSERT_TRUE(fp8.ok()) << fp8.status().message();
  const DeepseekWeights& w8 = (*fp8)->weights();
  ASSERT_EQ(w8.layers[0].attn.o_proj.dtype, DType::F8_E4M3);
  ASSERT_EQ(w8.layers[1].moe.experts[5].up.dtype, DType::F8_E4M3);
  for (const LinearWeight* lw : {&w8.layers[0].attn.o_proj, &w8.layers[0].attn.q_b_proj, &w8.layers[0].mlp.down,
                                 &w8.layers[1].moe.experts[5].up, &w8.layers[1].moe.shared.gate})
    EXPECT_EQ(lw->act_dtype, DType::BF16);
  EXPECT_EQ(w8.layers[0].attn.kv_b_proj.act_dtype, DType::F32);
  EXPECT_EQ(w8.layers[1].moe.router.act_dtype, DType::F32);
  EXPECT_EQ(w8.embed.act_dtype, DType::F32);

  auto f32 = DeepseekModel::Load("tests/data/models/tiny-v3", ModelOptions{}, cpu_backend());
  EXPECT_EQ((*f32)->weights().lm_head.act_dtype, DType::F32);
}

// Expert parallelism with the relay: rebinding a layer's experts relays the ones it binds and hands
// back only mapped weights for the ones it drops (their relaid copies are freed, never released as
// pages). Skipped where the CPU level keeps fp8 weights as stored.
TEST(DeepseekWeights, RebindingRelaysTheExpertsItBindsAndFreesTheOnesItDrops) {
  const std::string dir = "tests/data/models/tiny-v3-fp8";
  auto config = ModelConfig::Load(dir);
  auto ckpt = Checkpoint::Open(dir);
  ASSERT_TRUE(config.ok() && ckpt.ok());
  auto placement = ExpertPlacement::contiguous(config->n_routed_experts, 2, 0);  // experts 0-7
  ASSERT_TRUE(placement.ok());
  auto w = DeepseekWeights::Bind(*ckpt, *config, dir, &*placement);
  ASSERT_TRUE(w.ok()) << w.status().message();
  (*w)->use_bf16_activations();
  const MoeWeights& moe = (*w)->layers[1].moe;
  ASSERT_EQ(moe.experts.size(), 16u);
  const bool relays = cpu_backend().relaid_bytes(moe.experts[0].gate) > 0;
  const size_t relaid = (*w)->relay(cpu_backend());
  if (!relays) GTEST_SKIP() << "this CPU level keeps fp8 weights as stored";
  EXPECT_GT(relaid, 0u);
  EXPECT_TRUE(moe.experts[0].gate.tile_major && moe.experts[7].down.tile_major);
  EXPECT_EQ(moe.experts[8].gate.data, nullptr);
  const void* kept = moe.experts[5].up.data;
  const std::vector<int32_t> held = {4, 5, 6, 7, 8, 9, 10, 11};
  std::vector<MlpWeights> dropped;
  auto bound = (*w)->rebind_experts(*ckpt, *config, dir, 1, held, dropped);
  ASSERT_TRUE(bound.ok()) << bound.status().message();
  EXPECT_EQ(*bound, (std::vector<int32_t>{8, 9, 10, 11}));
  for (int e = 8; e < 12; ++e)
    for (const LinearWeight* lw : {&moe.experts[size_t(e)].gate, &moe.experts[size_t(e)].up, &moe.experts[size_t(e)].down}) {
      EXPECT_TRUE(lw->tile_major) << "expert " << e;
      EXPECT_EQ(lw->act_dtype, DType::BF16) << "expert " << e;
    }
  EXPECT_EQ(moe.experts[5].up.data, kept);
  EXPECT_EQ(moe.experts[0].gate.data, nullptr);
  ASSERT_EQ(dropped.size(), 4u);
  for (const MlpWeights& d : dropped)
    for (const LinearWeight* lw : {&d.gate, &d.up, &d.down}) EXPECT_EQ(lw->data, nullptr);
}

TEST(DeepseekWeights, MissingTensorIsNamed) {
  const std::string e = load_error("tiny-v3", {{"model.embed_tokens.weight", "BF16", {1024, 256}}});
  EXPECT_NE(e.find("tensor 'model.layers.0.input_layernorm.weight' is missing"), std::string::npos) << e;
}

TEST(DeepseekWeights, MisshapenTensorIsNamedWithBothShapes) {
  const std::string e = load_error("tiny-v3", {{"model.embed_tokens.weight", "BF16", {1024, 128}}});
  EXPECT_NE(e.find("model.safetensors: tensor 'model.embed_tokens.weight' has shape [1024, 128], expected [1024, 256]"),
            std::string::npos)
      << e;
}

TEST(DeepseekWeights, Fp8NeedsQuantizationConfigAndScales) {
  const std::vector<FakeTensor> head = {{"model.embed_tokens.weight", "BF16", {1024, 256}},
                                        {"model.layers.0.input_layernorm.weight", "BF16", {256}},
                                        {"model.layers.0.post_attention_layernorm.weight", "BF16", {256}},
                                        {"model.layers.0.self_attn.q_a_proj.weight", "F8_E4M3", {192, 256}}};
  const std::string no_config = load_error("tiny-v3", head);
  EXPECT_NE(no_config.find("'model.layers.0.self_attn.q_a_proj.weight' is F8_E4M3 but config.json has no fp8"),
            std::string::npos)
      << no_config;
  const std::string no_scale = load_error("tiny-v3-fp8", head);
  EXPECT_NE(no_scale.find("'model.layers.0.self_attn.q_a_proj.weight_scale_inv' is missing"), std::string::npos)
      << no_scale;
  auto with_bad_scale = head;
  with_bad_scale.push_back({"model.layers.0.self_attn.q_a_proj.weight_scale_inv", "F32", {1, 2}});
  const std::string bad_scale = load_error("tiny-v3-fp8", with_bad_scale);
  EXPECT_NE(bad_scale.find("has shape [1, 2], expected [2, 2]"), std::string::npos) << bad_scale;
}

TEST(DeepseekWeights, NormsMustNotBeFp8) {
  const std::string e = load_error("tiny-v3-fp8", {{"model.embed_tokens.weight", "BF16", {1024, 256}},
                                                   {"model.layers.0.input_layernorm.weight", "F8_E4M3", {256}}});
  EXPECT_NE(e.find("'model.layers.0.input_layernorm.weight' must be F32, F16 or BF16"), std::string::npos) << e;
}

}  // namespace
}  // namespace deepinfer
