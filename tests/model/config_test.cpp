// Unit tests for config.json parsing: the fixtures' configs (written for DeepSeek's reference
// and Hugging Face's DeepseekV2/V3 classes) and the errors for malformed ones.
#include "model/config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "safetensors_writer.h"

namespace deepinfer {
namespace {

using nlohmann::json;

json fixture(const std::string& name) {
  auto text = read_text_file("tests/data/models/" + name + "/config.json");
  EXPECT_TRUE(text.ok());
  return json::parse(text.value());
}

std::string error_of(const json& j) {
  auto r = ModelConfig::FromJson(j, "config.json");
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.status().message();
}

TEST(ModelConfig, TinyV3) {
  auto c = ModelConfig::Load("tests/data/models/tiny-v3");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->is_v3);
  EXPECT_EQ(c->q_lora_rank, 192);
  EXPECT_EQ(c->kv_lora_rank, 128);
  EXPECT_EQ(c->qk_head_dim(), 96);
  EXPECT_EQ(c->topk_method, TopkMethod::kNoauxTc);
  EXPECT_EQ(c->scoring_func, ScoringFunc::kSigmoid);
  EXPECT_EQ(c->n_group, 4);
  EXPECT_EQ(c->topk_group, 2);
  EXPECT_TRUE(c->norm_topk_prob);
  EXPECT_DOUBLE_EQ(c->routed_scaling_factor, 2.5);
  EXPECT_TRUE(c->rope_scaling.yarn);
  EXPECT_DOUBLE_EQ(c->rope_scaling.factor, 40);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_FALSE(c->fp8.enabled);
  EXPECT_FALSE(c->is_moe_layer(0));
  EXPECT_TRUE(c->is_moe_layer(1));
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{1}));
}

TEST(ModelConfig, TinyV2WithoutQueryLora) {
  auto c = ModelConfig::Load("tests/data/models/tiny-v2");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_FALSE(c->is_v3);
  EXPECT_EQ(c->q_lora_rank, 0);
  EXPECT_EQ(c->topk_method, TopkMethod::kGreedy);
  EXPECT_EQ(c->scoring_func, ScoringFunc::kSoftmax);
  EXPECT_EQ(c->n_shared_experts, 2);
}

TEST(ModelConfig, Fp8Quantization) {
  auto c = ModelConfig::Load("tests/data/models/tiny-v3-fp8");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->fp8.enabled);
  EXPECT_EQ(c->fp8.block_rows, 128);
  EXPECT_EQ(c->fp8.block_cols, 128);
  json j = fixture("tiny-v3-fp8");
  j["quantization_config"]["quant_method"] = "awq";
  EXPECT_NE(error_of(j).find("quant_method 'awq'"), std::string::npos);
  j = fixture("tiny-v3-fp8");
  j["quantization_config"]["weight_block_size"] = {128};
  EXPECT_NE(error_of(j).find("weight_block_size"), std::string::npos);
}

TEST(ModelConfig, MoeLayerFrequency) {
  json j = fixture("tiny-v3");
  j["moe_layer_freq"] = 2;
  j["first_k_dense_replace"] = 1;
  auto c = ModelConfig::FromJson(j, "config.json");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->is_moe_layer(0));
  EXPECT_FALSE(c->is_moe_layer(1));
  EXPECT_TRUE(c->is_moe_layer(2));
}

TEST(ModelConfig, ErrorsNameTheField) {
  json j = fixture("tiny-v3");
  j.erase("kv_lora_rank");
  EXPECT_NE(error_of(j).find("'kv_lora_rank'"), std::string::npos);
  j = fixture("tiny-v3");
  j["hidden_size"] = "big";
  EXPECT_NE(error_of(j).find("'hidden_size' must be an integer"), std::string::npos);
  j = fixture("tiny-v3");
  j["architectures"] = {"LlamaForCausalLM"};
  EXPECT_NE(error_of(j).find("'LlamaForCausalLM' is not supported"), std::string::npos);
  j = fixture("tiny-v3");
  j["topk_method"] = "random";
  EXPECT_NE(error_of(j).find("topk_method 'random'"), std::string::npos);
  j = fixture("tiny-v3");
  j["scoring_func"] = "relu";
  EXPECT_NE(error_of(j).find("scoring_func 'relu'"), std::string::npos);
  j = fixture("tiny-v3");
  j["rope_scaling"]["type"] = "linear";
  EXPECT_NE(error_of(j).find("rope_scaling type 'linear'"), std::string::npos);
  j = fixture("tiny-v3");
  j["n_routed_experts"] = 15;
  EXPECT_NE(error_of(j).find("divisible by n_group"), std::string::npos);
  j = fixture("tiny-v3");
  j["num_key_value_heads"] = 1;
  EXPECT_NE(error_of(j).find("num_key_value_heads"), std::string::npos);
  j = fixture("tiny-v3");
  j["qk_rope_head_dim"] = 31;
  EXPECT_NE(error_of(j).find("even"), std::string::npos);
  j = fixture("tiny-v3");
  j["num_hidden_layers"] = -3;
  EXPECT_NE(error_of(j).find("out of range"), std::string::npos);
  EXPECT_NE(error_of(json::array()).find("not a JSON object"), std::string::npos);
}

TEST(ModelConfig, GenerationConfigEosList) {
  testing::TempDir dir("config-eos");
  auto text = read_text_file("tests/data/models/tiny-v3/config.json");
  testing::write_file(dir.path() / "config.json", text.value());
  testing::write_file(dir.path() / "generation_config.json", R"({"eos_token_id": [1, 7], "bos_token_id": 0})");
  auto c = ModelConfig::Load(dir.path().string());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->eos_token_ids, (std::vector<int32_t>{1, 7}));
  testing::write_file(dir.path() / "generation_config.json", R"({"eos_token_id": "x"})");
  auto bad = ModelConfig::Load(dir.path().string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("generation_config.json"), std::string::npos);
}

TEST(ModelConfig, MissingOrBrokenFile) {
  auto missing = ModelConfig::Load("/nonexistent-dir");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("config.json"), std::string::npos);
  testing::TempDir dir("config-broken");
  testing::write_file(dir.path() / "config.json", "{\"architectures\": [");
  auto broken = ModelConfig::Load(dir.path().string());
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("not valid JSON"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer
