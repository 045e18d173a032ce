// GrammarCache: compiled constraints shared by (kind, text), errors naming the problem and the
// request field, the LRU bound, a refusal for grammars whose first mask passes the limits, and
// the background warm-up of the vocabulary's JSON frames.
#include "server/grammar_cache.h"
#include "server/tool_call_grammar.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace deepinfer {
namespace {

std::shared_ptr<const grammar::TokenVocabulary> vocabulary() {
  std::vector<std::string> tokens = {"", "a", "b", "ab", "{", "}", "\"", ":", "1", "2", " ", ","};
  return std::make_shared<const grammar::TokenVocabulary>(tokens, std::vector<int32_t>{0});
}

OutputConstraint constraint(OutputConstraint::Kind kind, std::string text, std::string param) {
  return {kind, std::move(text), std::move(param)};
}

TEST(GrammarCache, SameKindAndTextShareOneMaskCache) {
  using Kind = OutputConstraint::Kind;
  GrammarCache cache(vocabulary(), {});
  auto a = cache.get(constraint(Kind::kRegex, "(ab)+", "regex"));
  ASSERT_TRUE(a.ok()) << a.status().message();
  auto again = cache.get(constraint(Kind::kRegex, "(ab)+", "regex"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(a.value().get(), again.value().get());
  // The same text as another kind is another grammar.
  auto g = cache.get(constraint(Kind::kGrammar, "root ::= \"a\" \"b\"", "grammar"));
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_NE(g.value().get(), a.value().get());
  auto obj = cache.get(constraint(Kind::kJsonObject, "", "response_format"));
  ASSERT_TRUE(obj.ok());
  EXPECT_EQ(cache.n_entries(), 3u);
  // Warm: the first state's mask was computed when compiled.
  EXPECT_GE(a.value()->n_cached_masks(), 1u);
}

TEST(GrammarCache, ErrorsNameTheProblemAndTheFieldAndAreKept) {
  using Kind = OutputConstraint::Kind;
  GrammarCache cache(vocabulary(), {});
  auto bad_schema = cache.get(constraint(Kind::kJsonSchema, R"({"type": "object", "not": {}})", "response_format"));
  ASSERT_FALSE(bad_schema.ok());
  EXPECT_EQ(bad_schema.status().field(), "response_format");
  EXPECT_NE(bad_schema.status().message().find("'response_format.json_schema.schema'"), std::string::npos);
  EXPECT_NE(bad_schema.status().message().find("'not'"), std::string::npos) << bad_schema.status().message();
  auto bad_regex = cache.get(constraint(Kind::kRegex, "(a", "regex"));
  ASSERT_FALSE(bad_regex.ok());
  EXPECT_EQ(bad_regex.status().field(), "regex");
  auto bad_grammar = cache.get(constraint(Kind::kGrammar, "root ::= nothing", "grammar"));
  ASSERT_FALSE(bad_grammar.ok());
  EXPECT_NE(bad_grammar.status().message().find("nothing"), std::string::npos) << bad_grammar.status().message();
  EXPECT_EQ(cache.n_entries(), 3u);
  auto again = cache.get(constraint(Kind::kRegex, "(a", "regex"));
  EXPECT_EQ(again.status().message(), bad_regex.status().message());
  EXPECT_EQ(cache.n_entries(), 3u);
}

// Strict tools (server/tool_call_grammar.h) are one more kind: cached by their constraint text,
// their errors already naming the tool's field.
TEST(GrammarCache, ToolCallConstraintsAreCachedAndNameTheToolsField) {
  using Kind = OutputConstraint::Kind;
  GrammarCache cache(vocabulary(), {});
  const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "f", "strict": true, "parameters": {"type": "object"}}}])");
  auto text = tool_call_constraint_text(ToolCallFormat::kDeepseekV31, "function", "f", tools);
  ASSERT_TRUE(text.ok()) << text.status().message();
  auto a = cache.get(constraint(Kind::kToolCalls, text.value(), "tools"));
  ASSERT_TRUE(a.ok()) << a.status().message();
  auto again = cache.get(constraint(Kind::kToolCalls, text.value(), "tools"));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(a.value().get(), again.value().get());
  const nlohmann::ordered_json bad = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "f", "strict": true, "parameters": {"type": "object", "not": {}}}}])");
  auto bad_text = tool_call_constraint_text(ToolCallFormat::kDeepseekV31, "auto", "", bad);
  ASSERT_TRUE(bad_text.ok());
  auto error = cache.get(constraint(Kind::kToolCalls, bad_text.value(), "tools"));
  ASSERT_FALSE(error.ok());
  EXPECT_EQ(error.status().field(), "tools");
  EXPECT_EQ(error.status().message().rfind("'tools[0].function.parameters': unsupported JSON Schema keyword 'not'", 0), 0u)
      << error.status().message();
}

TEST(GrammarCache, KeepsAtMostMaxEntriesLeastRecentlyUsedOut) {
  using Kind = OutputConstraint::Kind;
  GrammarCacheOptions options;
  options.max_entries = 3;
  GrammarCache cache(vocabulary(), options);
  auto first = cache.get(constraint(Kind::kRegex, "a", "regex")).value();
  for (int i = 1; i <= 5; ++i) {
    cache.get(constraint(Kind::kRegex, "a{" + std::to_string(i) + "}b", "regex"));
    cache.get(constraint(Kind::kRegex, "a", "regex"));  // kept recent
  }
  EXPECT_EQ(cache.n_entries(), 3u);
  EXPECT_EQ(cache.get(constraint(Kind::kRegex, "a", "regex")).value().get(), first.get());
}

TEST(GrammarCache, RefusesAGrammarWhoseFirstMaskPassesTheLimits) {
  GrammarCacheOptions options;
  options.matcher.automaton.max_leaves_per_state = 8;
  GrammarCache cache(vocabulary(), options);
  auto r = cache.get(constraint(OutputConstraint::Kind::kRegex, "(a|a|a|a|a|a|a|a|a|a)b", "regex"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().field(), "regex");
  EXPECT_NE(r.status().message().find("too complex"), std::string::npos) << r.status().message();
}

TEST(GrammarCache, WarmsTheVocabularysJsonFramesInTheBackground) {
  const auto vocab = vocabulary();
  {
    GrammarCache cache(vocab, {});
    cache.warm_frames({grammar::JsonSchemaOptions{}});
    // Requests are served meanwhile.
    ASSERT_TRUE(cache.get(constraint(OutputConstraint::Kind::kJsonObject, "", "response_format")).ok());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (vocab->frame_masks().size() < 10 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_GE(vocab->frame_masks().size(), 10u);
  }  // stops and joins the warm-up
  GrammarCache cache(vocab, {});
  cache.warm_frames({grammar::JsonSchemaOptions{}});
}  // destroyed at once: the warm-up is cancelled, never left running

}  // namespace
}  // namespace deepinfer
