// The real DeepSeek-V3 tokenizer against the Hugging Face `tokenizers` library (0.22).
// Expected values: tests/data/tokenizers/deepseek-v3/golden.jsonl and chat_golden.jsonl, copied
// from the team fixtures (shared/fixtures/tokenizers/deepseek-v3), which the library produced:
// ids of encode(text, add_special_tokens=False) and decode(ids, skip_special_tokens=False).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

using json = nlohmann::json;

constexpr const char* kDir = "tests/data/tokenizers/deepseek-v3";

std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) rows.push_back(json::parse(line));
  return rows;
}

const Tokenizer& deepseek() {
  static const Tokenizer tokenizer = [] {
    auto t = Tokenizer::Load(kDir);
    if (!t.ok()) {
      ADD_FAILURE() << t.status().message();
      std::abort();
    }
    return *t;
  }();
  return tokenizer;
}

TEST(DeepSeekV3Golden, EncodeMatchesLibraryOnAllTexts) {
  const auto rows = read_jsonl(std::string(kDir) + "/golden.jsonl");
  ASSERT_EQ(rows.size(), 1181u);
  int mismatches = 0;
  for (const json& row : rows) {
    const std::string text = row["text"];
    auto ids = deepseek().encode(text, false);
    ASSERT_TRUE(ids.ok()) << ids.status().message();
    const auto expected = row["ids"].get<std::vector<int32_t>>();
    if (*ids != expected && ++mismatches <= 5) ADD_FAILURE() << "encode differs for: " << text;
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(DeepSeekV3Golden, DecodeMatchesLibraryOnAllTexts) {
  const auto rows = read_jsonl(std::string(kDir) + "/golden.jsonl");
  int mismatches = 0;
  for (const json& row : rows) {
    const auto ids = row["ids"].get<std::vector<int32_t>>();
    auto text = deepseek().decode(ids, false);
    ASSERT_TRUE(text.ok()) << text.status().message();
    if (*text != row["decoded"].get<std::string>() && ++mismatches <= 5) {
      ADD_FAILURE() << "decode differs for: " << row["decoded"];
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(DeepSeekV3Golden, RenderedChatsEncodeToLibraryIds) {
  const auto rows = read_jsonl(std::string(kDir) + "/chat_golden.jsonl");
  ASSERT_FALSE(rows.empty());
  for (const json& row : rows) {
    auto ids = deepseek().encode(row["rendered"].get<std::string>(), false);
    ASSERT_TRUE(ids.ok()) << ids.status().message();
    EXPECT_EQ(*ids, row["ids"].get<std::vector<int32_t>>()) << row["rendered"];
  }
}

TEST(DeepSeekV3Golden, ConfigFields) {
  // Values from tests/data/tokenizers/deepseek-v3/tokenizer_config.json and tokenizer.json.
  const Tokenizer& t = deepseek();
  EXPECT_EQ(t.vocab_size(), 128815u);
  EXPECT_EQ(t.bos_token(), "<｜begin▁of▁sentence｜>");
  EXPECT_EQ(t.eos_token(), "<｜end▁of▁sentence｜>");
  EXPECT_EQ(t.pad_token(), "<｜end▁of▁sentence｜>");
  EXPECT_FALSE(t.unk_token().has_value());
  EXPECT_EQ(t.bos_token_id(), 0);
  EXPECT_EQ(t.eos_token_id(), 1);
  EXPECT_EQ(t.eos_token_ids(), std::vector<int32_t>{1});
  EXPECT_EQ(t.add_bos_token(), true);
  EXPECT_EQ(t.add_eos_token(), false);
  EXPECT_EQ(t.model_max_length(), 131072u);
  ASSERT_TRUE(t.chat_template().is_string());
  EXPECT_TRUE(t.chat_template().get<std::string>().starts_with("{% if not add_generation_prompt"));
  EXPECT_EQ(t.token_to_id("<｜User｜>"), 128803);
  EXPECT_EQ(t.id_to_token(128803), "<｜User｜>");
  EXPECT_TRUE(t.is_special_id(0));
  EXPECT_FALSE(t.is_special_id(128803));  // "special": false in tokenizer.json
}

TEST(DeepSeekV3Golden, AddSpecialTokensPrependsBos) {
  // add_bos_token true, add_eos_token false (tokenizer_config.json); ids from golden.jsonl.
  auto ids = deepseek().encode("Hello world", true);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{0, 19923, 2058}));
}

}  // namespace
}  // namespace deepinfer
