// Strict tool arguments (server/tool_call_grammar.h) over the DeepSeek-V3 vocabulary: random
// token walks under the grammar, decoded and read back by the tool-call parser the server uses
// (chat::ToolCallParser) after the forced prefix of server/tool_choice.h, give calls of declared
// tools whose arguments satisfy the tool's schema; the matcher's masks equal a brute-force
// reference (each token's bytes walked through a separate automaton); bad tools name their field.
#include "server/tool_call_grammar.h"

#include <gtest/gtest.h>

#include <memory>

#include "chat/deepseek_v3_markup.h"
#include "chat/tool_call_parser.h"
#include "grammar/grammar_automaton.h"
#include "grammar/token_vocabulary.h"
#include "tokenizer/tokenizer.h"
#include "token_walk.h"

namespace deepinfer {
namespace {

using json = nlohmann::ordered_json;
using grammar::GrammarAutomaton;

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "strict": true, "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 4},
      "days": {"type": "integer", "minimum": 1, "maximum": 7}, "unit": {"enum": ["c", "f"]}},
    "required": ["city", "days"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get", "strict": true}},
  {"type": "function", "function": {"name": "note", "parameters": {"type": "object"}}}
])");

// The arguments satisfy their tool's schema (written out for kTools).
void check_arguments(const std::string& name, const std::string& arguments) {
  const json args = json::parse(arguments, nullptr, false);
  ASSERT_TRUE(args.is_object()) << arguments;
  if (name == "get") {
    EXPECT_TRUE(args.empty()) << arguments;
  } else if (name == "get_weather") {
    ASSERT_TRUE(args.contains("city") && args.contains("days")) << arguments;
    for (const auto& [k, v] : args.items()) {
      if (k == "city") {
        ASSERT_TRUE(v.is_string()) << arguments;
        // maxLength counts code points.
        size_t n = 0;
        for (unsigned char c : v.get<std::string>()) n += (c & 0xC0) != 0x80;
        EXPECT_LE(n, 4u) << arguments;
      } else if (k == "days") {
        ASSERT_TRUE(v.is_number_integer()) << arguments;
        EXPECT_TRUE(v.get<int64_t>() >= 1 && v.get<int64_t>() <= 7) << arguments;
      } else if (k == "unit") {
        EXPECT_TRUE(v == "c" || v == "f") << arguments;
      } else {
        ADD_FAILURE() << "unexpected key " << k << " in " << arguments;
      }
    }
  } else {
    EXPECT_EQ(name, "note");
  }
}

class ToolCallGrammarTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto tok = Tokenizer::Load("tests/data/tokenizers/deepseek-v3");
    ASSERT_TRUE(tok.ok()) << tok.status().message();
    tokenizer_ = new Tokenizer(std::move(tok).value());
    auto v = grammar::TokenVocabulary::FromTokenizer(*tokenizer_);
    ASSERT_TRUE(v.ok()) << v.status().message();
    vocab_ = std::make_shared<const grammar::TokenVocabulary>(std::move(v).value());
  }
  static void TearDownTestSuite() { delete tokenizer_; }

  static grammar::CompiledGrammar compile(ToolCallFormat format, const std::string& choice, const std::string& function,
                                          const json& tools = kTools) {
    auto text = tool_call_constraint_text(format, choice, function, tools);
    EXPECT_TRUE(text.ok()) << text.status().message();
    auto g = compile_tool_call_grammar(text.value(), {});
    EXPECT_TRUE(g.ok()) << g.status().message();
    return std::move(g).value();
  }

  static std::string walk(const grammar::CompiledGrammar& g, uint64_t seed, int n_checked) {
    std::vector<int32_t> markers;
    for (std::string_view s : {chat::dsv3::kCallsBegin, chat::dsv3::kCallBegin, chat::dsv3::kCallEnd,
                               chat::dsv3::kCallsEnd, chat::dsv3::kSep})
      markers.push_back(*tokenizer_->token_to_id(s));
    return token_walk::random_walk(g, *tokenizer_, vocab_, markers, seed, n_checked);
  }

  static Tokenizer* tokenizer_;
  static std::shared_ptr<const grammar::TokenVocabulary> vocab_;
};

Tokenizer* ToolCallGrammarTest::tokenizer_ = nullptr;
std::shared_ptr<const grammar::TokenVocabulary> ToolCallGrammarTest::vocab_;

TEST_F(ToolCallGrammarTest, ForcedCallsParseIntoDeclaredToolsWithValidArguments) {
  for (ToolCallFormat format : {ToolCallFormat::kDeepseekV3, ToolCallFormat::kDeepseekV31}) {
    for (const auto& [choice, function] : std::vector<std::pair<std::string, std::string>>{
             {"required", ""}, {"function", "get_weather"}, {"function", "get"}}) {
      const grammar::CompiledGrammar g = compile(format, choice, function);
      const std::string prefix = forced_tool_call_prefix(format, choice, function);
      for (uint64_t seed = 0; seed < 6; ++seed) {
        const std::string text = walk(g, seed, seed == 0 ? 3 : 0);
        const chat::ToolCallDelta parsed = chat::parse_tool_calls(prefix + text);
        SCOPED_TRACE(prefix + text);
        EXPECT_EQ(parsed.content, "");
        ASSERT_FALSE(parsed.tool_calls.empty());
        for (const chat::ToolCall& call : parsed.tool_calls) {
          if (choice == "function") EXPECT_EQ(call.name, function);
          check_arguments(call.name, call.arguments);
        }
      }
    }
  }
}

TEST_F(ToolCallGrammarTest, AutoLetsTextOrCallsCome) {
  for (ToolCallFormat format : {ToolCallFormat::kDeepseekV3, ToolCallFormat::kDeepseekV31}) {
    const grammar::CompiledGrammar g = compile(format, "auto", "");
    int n_with_calls = 0;
    for (uint64_t seed = 0; seed < 10; ++seed) {
      const std::string text = walk(g, seed, seed == 0 ? 3 : 0);
      const chat::ToolCallDelta parsed = chat::parse_tool_calls(text);
      SCOPED_TRACE(text);
      // Text before the calls is content; only the calls marker opens calls, and it never stays text.
      EXPECT_EQ(parsed.content.find(chat::dsv3::kCallsBegin), std::string::npos);
      EXPECT_EQ(text.find(chat::dsv3::kCallsBegin) == std::string::npos, parsed.tool_calls.empty());
      n_with_calls += !parsed.tool_calls.empty();
      for (const chat::ToolCall& call : parsed.tool_calls) check_arguments(call.name, call.arguments);
    }
    EXPECT_GT(n_with_calls, 0);
  }
  // Text alone, ended where the model ends it; the calls marker only opens a block.
  const grammar::CompiledGrammar g = compile(ToolCallFormat::kDeepseekV3, "auto", "");
  GrammarAutomaton a(g.grammar());
  const auto accepts = [&](const std::string& t) {
    const int32_t s = a.walk(a.initial_state(), t);
    return s != GrammarAutomaton::kDead && a.accepts(s);
  };
  EXPECT_TRUE(accepts("hello <｜tool"));
  EXPECT_FALSE(accepts("hello " + std::string(chat::dsv3::kCallsBegin)));
  EXPECT_TRUE(accepts("hi" + std::string(chat::dsv3::kCallsBegin) + std::string(chat::dsv3::kCallBegin) +
                      "function" + std::string(chat::dsv3::kSep) + "get\n```json\n{}\n```" +
                      std::string(chat::dsv3::kCallEnd) + std::string(chat::dsv3::kCallsEnd)));
  EXPECT_FALSE(accepts("hi" + std::string(chat::dsv3::kCallsBegin) + std::string(chat::dsv3::kCallBegin) +
                       "function" + std::string(chat::dsv3::kSep) + "get\n```json\n{\"x\":1}\n```" +
                       std::string(chat::dsv3::kCallEnd) + std::string(chat::dsv3::kCallsEnd)));
}

TEST_F(ToolCallGrammarTest, WithAContentSchemaTheAnswerIsThatJsonOrCalls) {
  const json content = json::parse(R"({"type": "object", "properties": {"answer": {"type": "string", "maxLength": 6}},
                                       "required": ["answer"], "additionalProperties": false})");
  for (ToolCallFormat format : {ToolCallFormat::kDeepseekV3, ToolCallFormat::kDeepseekV31}) {
    auto text = tool_call_constraint_text(format, "auto", "", kTools, content);
    ASSERT_TRUE(text.ok()) << text.status().message();
    auto g = compile_tool_call_grammar(text.value(), {});
    ASSERT_TRUE(g.ok()) << g.status().message();
    int n_json = 0, n_calls = 0;
    for (uint64_t seed = 0; seed < 10; ++seed) {
      const std::string out = walk(g.value(), seed, seed == 0 ? 3 : 0);
      const chat::ToolCallDelta parsed = chat::parse_tool_calls(out);
      SCOPED_TRACE(out);
      if (parsed.tool_calls.empty()) {
        const json answer = json::parse(parsed.content, nullptr, false);
        ASSERT_TRUE(answer.is_object() && answer.size() == 1 && answer["answer"].is_string());
        EXPECT_EQ(answer["answer"].get<std::string>().find('<'), std::string::npos);
        ++n_json;
      } else {
        EXPECT_EQ(parsed.content, "");
        for (const chat::ToolCall& call : parsed.tool_calls) check_arguments(call.name, call.arguments);
        ++n_calls;
      }
    }
    EXPECT_GT(n_json, 0);
    EXPECT_GT(n_calls, 0);
  }
  auto text = tool_call_constraint_text(ToolCallFormat::kDeepseekV3, "auto", "", kTools, json::parse(R"({"not": {}})"));
  ASSERT_TRUE(text.ok());
  auto g = compile_tool_call_grammar(text.value(), {});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().field(), "response_format");
  EXPECT_NE(g.status().message().find("'response_format.json_schema.schema': unsupported JSON Schema keyword 'not'"),
            std::string::npos)
      << g.status().message();
}

TEST_F(ToolCallGrammarTest, MarkersAreTheirAddedTokens) {
  // The markers are added (not special) tokens whose bytes are their text, so the byte-level
  // grammar allows the one token where the marker may come.
  for (std::string_view s : {chat::dsv3::kCallsBegin, chat::dsv3::kCallsEnd, chat::dsv3::kCallBegin,
                             chat::dsv3::kCallEnd, chat::dsv3::kSep}) {
    const std::optional<int32_t> id = tokenizer_->token_to_id(s);
    ASSERT_TRUE(id.has_value()) << s;
    EXPECT_EQ(vocab_->bytes(*id), s);
  }
}

TEST_F(ToolCallGrammarTest, BadToolsNameTheirField) {
  const auto error = [](const json& tools, ToolCallFormat format = ToolCallFormat::kDeepseekV3) -> std::string {
    auto text = tool_call_constraint_text(format, "auto", "", tools);
    if (!text.ok()) return text.status().message();
    auto g = compile_tool_call_grammar(text.value(), {});
    return g.ok() ? "" : g.status().message();
  };
  const auto tool = [](const std::string& name, const json& parameters) {
    json f = {{"name", name}, {"strict", true}};
    if (!parameters.is_null()) f["parameters"] = parameters;
    return json{{"type", "function"}, {"function", f}};
  };
  EXPECT_NE(error(json::array({tool("a", nullptr), tool("b", json::parse(R"({"type": "string"})"))}))
                .find("'tools[1].function.parameters': must describe a JSON object"),
            std::string::npos);
  EXPECT_NE(error(json::array({tool("a", json::parse(R"({"type": "object", "if": {}})"))}))
                .find("'tools[0].function.parameters': unsupported JSON Schema keyword 'if'"),
            std::string::npos);
  EXPECT_NE(error(json::array({tool("a b", nullptr)})).find("'tools[0].function.name'"), std::string::npos);
  EXPECT_NE(error(json::array({tool("a", nullptr), tool("a", nullptr)})).find("'tools[1].function.name': 'a' names two"),
            std::string::npos);
  EXPECT_NE(error(json::array({tool("a", nullptr)}), ToolCallFormat::kUnknown).find("not supported"), std::string::npos);
  EXPECT_TRUE(has_strict_tools(json::array({tool("a", nullptr)})));
  EXPECT_FALSE(has_strict_tools(kTools.at(2).is_object() ? json::array({kTools.at(2)}) : json()));
}

}  // namespace
}  // namespace deepinfer
