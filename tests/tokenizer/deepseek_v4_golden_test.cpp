// The real DeepSeek-V4 tokenizer against the Hugging Face `tokenizers` library (0.23.3).
// Expected values: tests/data/tokenizers/deepseek-v4/golden.jsonl, copied from the team fixtures
// (shared/fixtures/tokenizers/deepseek-v4), which the library produced: ids of
// encode(text, add_special_tokens=False), decode(ids, skip_special_tokens=False) and
// decode(ids, skip_special_tokens=True). The texts are the V3 golden's 1,181 and 44 V4 edge
// texts around the 465 added tokens (<think>, ｜DSML｜, place holders, image tokens).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

using json = nlohmann::json;

constexpr const char* kDir = "tests/data/tokenizers/deepseek-v4";

std::vector<json> read_golden() {
  std::vector<json> rows;
  std::ifstream in(std::string(kDir) + "/golden.jsonl");
  std::string line;
  while (std::getline(in, line)) rows.push_back(json::parse(line));
  return rows;
}

const Tokenizer& deepseek_v4() {
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

TEST(DeepSeekV4Golden, EncodeMatchesLibraryOnAllTexts) {
  const auto rows = read_golden();
  ASSERT_EQ(rows.size(), 1225u);
  int mismatches = 0;
  for (const json& row : rows) {
    const std::string text = row["text"];
    auto ids = deepseek_v4().encode(text, false);
    ASSERT_TRUE(ids.ok()) << ids.status().message();
    if (*ids != row["ids"].get<std::vector<int32_t>>() && ++mismatches <= 5) {
      ADD_FAILURE() << "encode differs for: " << text;
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(DeepSeekV4Golden, DecodeMatchesLibraryOnAllTexts) {
  const auto rows = read_golden();
  int mismatches = 0;
  for (const json& row : rows) {
    const auto ids = row["ids"].get<std::vector<int32_t>>();
    for (const bool skip : {false, true}) {
      auto text = deepseek_v4().decode(ids, skip);
      ASSERT_TRUE(text.ok()) << text.status().message();
      const std::string expected = row[skip ? "decoded_skip_special" : "decoded"];
      if (*text != expected && ++mismatches <= 5) {
        ADD_FAILURE() << "decode (skip_special_tokens=" << skip << ") differs for: " << row["text"];
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(DeepSeekV4Golden, ConfigFieldsAndNewTokens) {
  // Values from tests/data/tokenizers/deepseek-v4/tokenizer_config.json and tokenizer.json, and
  // the ids the fixtures' README lists.
  const Tokenizer& t = deepseek_v4();
  EXPECT_EQ(t.vocab_size(), 129280u);
  EXPECT_EQ(t.bos_token_id(), 0);
  EXPECT_EQ(t.eos_token_id(), 1);
  EXPECT_EQ(t.add_bos_token(), false);
  EXPECT_EQ(t.add_eos_token(), false);
  EXPECT_EQ(t.model_max_length(), 1048576u);
  EXPECT_FALSE(t.chat_template().is_string());  // V4 ships its own encoder, no Jinja template
  EXPECT_EQ(t.token_to_id("<think>"), 128821);
  EXPECT_EQ(t.token_to_id("</think>"), 128822);
  EXPECT_EQ(t.token_to_id("｜DSML｜"), 128825);
  EXPECT_EQ(t.token_to_id("<｜latest_reminder｜>"), 128828);
  EXPECT_EQ(t.token_to_id("<｜image｜>"), 129279);
  EXPECT_FALSE(t.is_special_id(128821));  // "special": false: kept by skip_special_tokens
  EXPECT_FALSE(t.is_special_id(128805));  // <|EOT|> is no longer special in V4
  EXPECT_TRUE(t.is_special_id(128847));   // the first <|place_holder_mm_span_NNNN|>
}

TEST(DeepSeekV4Golden, AddSpecialTokensAddsNoBos) {
  // add_bos_token false: the encoder writes BOS itself. Ids as in golden.jsonl for "Hello world".
  auto ids = deepseek_v4().encode("Hello world", true);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<int32_t>{19923, 2058}));
}

}  // namespace
}  // namespace deepinfer
