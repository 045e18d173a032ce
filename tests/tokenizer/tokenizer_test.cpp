// Tokenizer API: bad input as data, huge inputs, threads, loading errors and configuration.
// Expected ids come from the `tokenizers` library (0.22.1): on the DeepSeek-V3 tokenizer (e.g.
// "Hello world" -> [19923, 2058] as in golden.jsonl), and on the tiny tokenizer built here, whose
// JSON the library loads the same way (its outputs were checked with Tokenizer.from_str).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

const Tokenizer& deepseek() {
  static const Tokenizer tokenizer = *Tokenizer::Load("tests/data/tokenizers/deepseek-v3");
  return tokenizer;
}

// A tiny BPE: merges "a b" then "ab c"; <s> and </s> as special added tokens.
std::string tiny_json(const std::string& extra_model_fields = "") {
  return R"({"added_tokens": [
      {"id": 5, "content": "<s>", "special": true, "normalized": false},
      {"id": 6, "content": "</s>", "special": true, "normalized": false}],
    "normalizer": null, "pre_tokenizer": {"type": "WhitespaceSplit"}, "decoder": null,
    "model": {"type": "BPE", )" + extra_model_fields + R"(
      "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4},
      "merges": ["a b", "ab c"]}})";
}

TEST(Tokenizer, InvalidUtf8IsAnError) {
  auto ids = deepseek().encode("ok \xC3\x28 bad", false);
  ASSERT_FALSE(ids.ok());
  EXPECT_NE(ids.status().message().find("UTF-8"), std::string::npos);
  EXPECT_NE(ids.status().message().find("offset 3"), std::string::npos);
  EXPECT_FALSE(deepseek().encode("\xED\xA0\x80", false).ok());  // encoded surrogate
}

TEST(Tokenizer, IdsOutsideTheVocabularyAreAnError) {
  const std::vector<int32_t> ids = {19923, 128815};
  auto text = deepseek().decode(ids, false);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("128815"), std::string::npos);
  EXPECT_FALSE(deepseek().decode(std::vector<int32_t>{-1}, true).ok());
}

TEST(Tokenizer, EmptyInputs) {
  EXPECT_TRUE(deepseek().encode("", false)->empty());
  EXPECT_EQ(*deepseek().encode("", true), std::vector<int32_t>{0});
  EXPECT_EQ(*deepseek().decode(std::vector<int32_t>{}, false), "");
}

TEST(Tokenizer, MegabyteInputsRoundTrip) {
  std::mt19937 rng(7);
  const char* fragments[] = {"word ", "  ", "\n", "\xE4\xBD\xA0\xE5\xA5\xBD", "12345", "\xF0\x9F\x99\x82", "x=y;", "\t"};
  std::string mixed;
  while (mixed.size() < (1u << 20)) mixed += fragments[rng() % 8];
  for (const std::string& text : {std::string(1 << 20, 'a'), std::string(1 << 20, ' '),
                                  std::string(1 << 20, '7'), mixed}) {
    auto ids = deepseek().encode(text, false);
    ASSERT_TRUE(ids.ok()) << ids.status().message();
    EXPECT_LT(ids->size(), text.size());
    auto back = deepseek().decode(*ids, false);
    ASSERT_TRUE(back.ok());
    EXPECT_TRUE(*back == text) << "round trip differs";
  }
}

TEST(Tokenizer, SpecialTokenStringsInTextBecomeSpecialTokens) {
  // Library: "<｜end▁of▁sentence｜>" -> [1]; decode with skip drops specials.
  EXPECT_EQ(*deepseek().encode("<｜end▁of▁sentence｜>", false), std::vector<int32_t>{1});
  EXPECT_EQ(*deepseek().decode(std::vector<int32_t>{0, 19923, 1}, true), "Hello");
}

TEST(Tokenizer, ConcurrentEncodeGivesTheSameIds) {
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) texts.push_back("text " + std::to_string(i * 7919) + " \xE4\xBD\xA0 words " + std::string(i % 13, ' '));
  std::vector<std::vector<int32_t>> expected;
  for (const auto& t : texts) expected.push_back(*deepseek().encode(t, false));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      const Tokenizer copy = deepseek();  // copies share the loaded state
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) mismatches[k] += *copy.encode(texts[i], false) != expected[i];
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

TEST(Tokenizer, TinyBpeMergesAndSplitsAtAddedTokens) {
  auto t = Tokenizer::FromJson(tiny_json());
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(*t->encode("abc ab ba <s>c", false), (std::vector<int32_t>{4, 3, 1, 0, 5, 2}));
  EXPECT_EQ(t->vocab_size(), 7u);
  EXPECT_EQ(*t->decode(std::vector<int32_t>{4, 3, 5}, false), "abc ab <s>");
  EXPECT_EQ(*t->decode(std::vector<int32_t>{4, 3, 5}, true), "abc ab");
}

TEST(Tokenizer, UnknownCharactersWithoutUnkTokenAreDropped) {
  // "x" is not in the vocabulary: dropped, so "a" and "b" still merge.
  auto t = Tokenizer::FromJson(tiny_json());
  EXPECT_EQ(*t->encode("axb", false), (std::vector<int32_t>{3}));
}

TEST(Tokenizer, FusedUnkToken) {
  auto t = Tokenizer::FromJson(tiny_json(R"("unk_token": "c", "fuse_unk": true,)"));
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(*t->encode("axyb", false), (std::vector<int32_t>{0, 2, 1}));
}

TEST(Tokenizer, AddSpecialTokensFollowsTokenizerConfig) {
  const std::string config = R"({"bos_token": {"__type": "AddedToken", "content": "<s>"},
      "eos_token": "</s>", "add_bos_token": true, "add_eos_token": true,
      "chat_template": [{"name": "default", "template": "{{ x }}"}],
      "model_max_length": 1000000000000000019884624838656})";
  auto t = Tokenizer::FromJson(tiny_json(), config, R"({"eos_token_id": [6, 2]})");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(*t->encode("ab", true), (std::vector<int32_t>{5, 3, 6}));
  EXPECT_EQ(t->eos_token_ids(), (std::vector<int32_t>{6, 2}));
  EXPECT_EQ(t->bos_token_id(), 5);
  EXPECT_TRUE(t->chat_template().is_array());
  EXPECT_EQ(t->chat_template()[0]["name"], "default");
  EXPECT_FALSE(t->model_max_length().has_value());
}

TEST(Tokenizer, TemplateProcessingWithoutConfigFlags) {
  std::string json = tiny_json();
  json.insert(json.find("\"decoder\""), R"("post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "</s>", "type_id": 0}}],
      "special_tokens": {"<s>": {"id": "<s>", "ids": [5], "tokens": ["<s>"]},
                         "</s>": {"id": "</s>", "ids": [6], "tokens": ["</s>"]}}}, )");
  auto t = Tokenizer::FromJson(json);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(*t->encode("ab", true), (std::vector<int32_t>{5, 3, 6}));
  EXPECT_EQ(*t->encode("ab", false), (std::vector<int32_t>{3}));
}

TEST(Tokenizer, LoadErrorsNameTheProblem) {
  auto missing = Tokenizer::Load("tests/data/tokenizers/no-such-model");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("tokenizer.json"), std::string::npos);

  auto broken = Tokenizer::FromJson("{not json");
  ASSERT_FALSE(broken.ok());

  auto wordpiece = Tokenizer::FromJson(R"({"model": {"type": "WordPiece", "vocab": {}}})");
  ASSERT_FALSE(wordpiece.ok());
  EXPECT_NE(wordpiece.status().message().find("WordPiece"), std::string::npos);

  std::string bad_merge = tiny_json();
  bad_merge.replace(bad_merge.find("\"a b\""), 5, "\"a z\"");
  auto merge = Tokenizer::FromJson(bad_merge);
  ASSERT_FALSE(merge.ok());
  EXPECT_NE(merge.status().message().find("'z'"), std::string::npos);

  std::string bad_pre = tiny_json();
  bad_pre.replace(bad_pre.find("WhitespaceSplit"), 15, "UnicodeScripts");
  auto pre = Tokenizer::FromJson(bad_pre);
  ASSERT_FALSE(pre.ok());
  EXPECT_NE(pre.status().message().find("UnicodeScripts"), std::string::npos);

  auto config = Tokenizer::FromJson(tiny_json(), R"({"bos_token": 5})");
  ASSERT_FALSE(config.ok());
  EXPECT_NE(config.status().message().find("bos_token"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer
