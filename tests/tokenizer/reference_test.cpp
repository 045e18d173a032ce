// Every tokenizer under tests/data/tokenizers/ against the Hugging Face `tokenizers` library.
// Expected values: <dir>/encode_reference.jsonl and <dir>/decode_reference.jsonl, written by
// tests/tokenizer/make_reference.py from the library (version pinned in requirements.txt); a
// null decode marks a sequence on which the library panics, which is skipped here.
// The streaming check compares the concatenated IncrementalDetokenizer output with the same
// library decode.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace deepinfer {
namespace {

using json = nlohmann::json;

std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) rows.push_back(json::parse(line));
  return rows;
}

// Streams `ids` one by one and checks each delta; returns the concatenation.
std::string stream(const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool skip) {
  IncrementalDetokenizer detokenizer(tokenizer, skip);
  std::string text;
  for (int32_t id : ids) {
    auto delta = detokenizer.push(id);
    EXPECT_TRUE(delta.ok()) << delta.status().message();
    if (!delta.ok()) return text;
    EXPECT_EQ(utf8::find_invalid(*delta), std::string::npos) << "delta splits a character";
    text += *delta;
  }
  auto rest = detokenizer.finish();
  EXPECT_TRUE(rest.ok());
  return text + (rest.ok() ? *rest : "");
}

class ReferenceTest : public testing::TestWithParam<std::string> {
 protected:
  std::string dir() const { return "tests/data/tokenizers/" + GetParam(); }
  Tokenizer load() const {
    auto t = Tokenizer::Load(dir());
    EXPECT_TRUE(t.ok()) << t.status().message();
    if (!t.ok()) std::abort();
    return *t;
  }
};

TEST_P(ReferenceTest, Encode) {
  const Tokenizer tokenizer = load();
  const auto rows = read_jsonl(dir() + "/encode_reference.jsonl");
  ASSERT_GT(rows.size(), 300u);
  int failures = 0;
  for (const json& row : rows) {
    const std::string text = row["text"];
    auto plain = tokenizer.encode(text, false);
    auto framed = tokenizer.encode(text, true);
    ASSERT_TRUE(plain.ok() && framed.ok()) << plain.status().message();
    if ((*plain != row["ids"].get<std::vector<int32_t>>() ||
         *framed != row["ids_with_special"].get<std::vector<int32_t>>()) &&
        ++failures <= 5) {
      ADD_FAILURE() << "encode differs for " << row["text"].dump();
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST_P(ReferenceTest, DecodeAndStream) {
  const Tokenizer tokenizer = load();
  auto rows = read_jsonl(dir() + "/encode_reference.jsonl");
  for (json& row : read_jsonl(dir() + "/decode_reference.jsonl")) rows.push_back(std::move(row));
  int failures = 0;
  for (const json& row : rows) {
    const auto ids = row["ids"].get<std::vector<int32_t>>();
    for (const bool skip : {false, true}) {
      const json& expected = row[skip ? "decoded_skip" : "decoded"];
      if (expected.is_null()) continue;
      auto text = tokenizer.decode(ids, skip);
      ASSERT_TRUE(text.ok()) << text.status().message();
      const std::string streamed = stream(tokenizer, ids, skip);
      if ((*text != expected.get<std::string>() || streamed != *text) && ++failures <= 5) {
        ADD_FAILURE() << "decode (skip=" << skip << ") differs for " << row["ids"].dump()
                      << "\n expected " << expected.dump() << "\n decoded  " << json(*text).dump()
                      << "\n streamed " << json(streamed).dump();
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Tokenizers, ReferenceTest,
    testing::Values("deepseek-v3", "gpt-neox-olmo", "dolma2", "mistral-v1-legacy",
                    "mistral-v1-metaspace", "tortoise", "variants/lowercase-nfkc-punctuation-digits",
                    "variants/split-behaviors-nfd-byte-fallback", "variants/metaspace-always-split",
                    "variants/bytelevel-prefix-ignore-merges", "variants/whitespace-nfkd-no-decoder",
                    "variants/replace-decoder-char-delimiter"),
    [](const testing::TestParamInfo<std::string>& info) {
      std::string name;
      for (char c : info.param) name.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
      return name;
    });

}  // namespace
}  // namespace deepinfer
