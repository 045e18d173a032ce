// Strict tools in DeepSeek-V4's DSML (server/tool_call_grammar.h) over the DeepSeek-V4
// vocabulary: random token walks under the grammar, decoded and read back, after the forced
// prefix of chat/deepseek_v4_request.h and with the end of sentence the model writes last, by
// DeepSeek-V4's output parser (chat::parse_deepseek_v4_completion, which refuses anything
// DeepSeek's own parser would), give calls of declared tools whose arguments satisfy the tool's
// schema, string parameters raw and the others JSON; the matcher's masks equal a brute-force
// reference; tool and parameter names the parser could not read back name their field.
#include <gtest/gtest.h>

#include <memory>

#include "chat/deepseek_v4_markup.h"
#include "chat/deepseek_v4_output_parser.h"
#include "chat/deepseek_v4_request.h"
#include "grammar/grammar_automaton.h"
#include "grammar/token_vocabulary.h"
#include "server/tool_call_grammar.h"
#include "token_walk.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

using json = nlohmann::ordered_json;
using grammar::GrammarAutomaton;

// Raw strings with '<', quotes and newlines allowed; a nullable string (raw or JSON null); a
// pattern; JSON arrays and objects; a tool without parameters; a non-strict tool.
const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "strict": true, "parameters": {
    "type": "object", "properties": {
      "city": {"type": "string", "maxLength": 5},
      "days": {"type": "integer", "minimum": 1, "maximum": 7},
      "unit": {"enum": ["c", "f"]},
      "note": {"type": ["string", "null"], "maxLength": 3},
      "code": {"$ref": "#/$defs/code"},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 2}, "maxItems": 2},
      "at": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"],
             "additionalProperties": false}},
    "required": ["city", "days"], "additionalProperties": false,
    "$defs": {"code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]$"}}}}},
  {"type": "function", "function": {"name": "get", "strict": true}},
  {"type": "function", "function": {"name": "note", "parameters": {"type": "object",
    "properties": {"text": {"type": "string"}}}}}
])");

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// The arguments satisfy their tool's schema (written out for kTools).
void check_arguments(const std::string& name, const std::string& arguments) {
  const json args = json::parse(arguments, nullptr, false);
  ASSERT_TRUE(args.is_object()) << arguments;
  if (name == "get") {
    EXPECT_TRUE(args.empty()) << arguments;
  } else if (name == "note") {
    for (const auto& [k, v] : args.items()) EXPECT_EQ(k, "text") << arguments;
  } else {
    ASSERT_EQ(name, "get_weather");
    ASSERT_TRUE(args.contains("city") && args.contains("days")) << arguments;
    for (const auto& [k, v] : args.items()) {
      if (k == "city") {
        ASSERT_TRUE(v.is_string()) << arguments;
        EXPECT_LE(code_points(v.get<std::string>()), 5u) << arguments;
      } else if (k == "days") {
        ASSERT_TRUE(v.is_number_integer()) << arguments;
        EXPECT_TRUE(v.get<int64_t>() >= 1 && v.get<int64_t>() <= 7) << arguments;
      } else if (k == "unit") {
        EXPECT_TRUE(v == "c" || v == "f") << arguments;
      } else if (k == "note") {
        EXPECT_TRUE(v.is_null() || (v.is_string() && code_points(v.get<std::string>()) <= 3)) << arguments;
      } else if (k == "code") {
        ASSERT_TRUE(v.is_string()) << arguments;
        const std::string c = v.get<std::string>();
        EXPECT_TRUE(c.size() == 4 && std::isupper(uint8_t(c[0])) && std::isupper(uint8_t(c[1])) && c[2] == '-' &&
                    std::isdigit(uint8_t(c[3])))
            << arguments;
      } else if (k == "tags") {
        ASSERT_TRUE(v.is_array() && v.size() <= 2) << arguments;
        for (const json& t : v) EXPECT_TRUE(t.is_string() && code_points(t.get<std::string>()) <= 2) << arguments;
      } else if (k == "at") {
        ASSERT_TRUE(v.is_object() && v.size() == 1 && v.contains("lat") && v["lat"].is_number()) << arguments;
      } else {
        ADD_FAILURE() << "unexpected key " << k << " in " << arguments;
      }
    }
  }
}

class ToolCallGrammarV4Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto tok = Tokenizer::Load("tests/data/tokenizers/deepseek-v4");
    ASSERT_TRUE(tok.ok()) << tok.status().message();
    tokenizer_ = new Tokenizer(std::move(tok).value());
    auto v = grammar::TokenVocabulary::FromTokenizer(*tokenizer_);
    ASSERT_TRUE(v.ok()) << v.status().message();
    vocab_ = std::make_shared<const grammar::TokenVocabulary>(std::move(v).value());
  }
  static void TearDownTestSuite() { delete tokenizer_; }

  static grammar::CompiledGrammar compile(const std::string& choice, const std::string& function,
                                          const json& tools = kTools) {
    auto text = tool_call_constraint_text(ToolCallFormat::kDeepseekV4, choice, function, tools);
    EXPECT_TRUE(text.ok()) << text.status().message();
    auto g = compile_tool_call_grammar(text.value(), {});
    EXPECT_TRUE(g.ok()) << g.status().message();
    return std::move(g).value();
  }

  // The "｜DSML｜" token, "\n\n" and "</" are offered at every step where allowed, so walks reach
  // the tags quickly.
  static std::string walk(const grammar::CompiledGrammar& g, uint64_t seed, int n_checked,
                          const std::string& start = "") {
    std::vector<int32_t> markers;
    for (std::string_view s : {chat::dsv4::kDsml, std::string_view("\n\n"), std::string_view("</")}) {
      auto ids = tokenizer_->encode(std::string(s), /*add_special_tokens=*/false);
      EXPECT_TRUE(ids.ok() && ids.value().size() == 1) << s;
      markers.push_back(ids.value()[0]);
    }
    auto start_ids = tokenizer_->encode(start, /*add_special_tokens=*/false);
    EXPECT_TRUE(start_ids.ok());
    return token_walk::random_walk(g, *tokenizer_, vocab_, markers, seed, n_checked, start_ids.value());
  }

  // The completion read back as DeepSeek's parser reads it, with the end of sentence after it.
  static chat::DeepseekV4Message parse(const std::string& completion) {
    auto m = chat::parse_deepseek_v4_completion(completion + std::string(chat::dsv4::kEos), /*thinking=*/false,
                                                [] { return std::string("call_0"); });
    EXPECT_TRUE(m.ok()) << m.status().message() << "\n" << completion;
    return m.ok() ? std::move(m).value() : chat::DeepseekV4Message{};
  }

  static Tokenizer* tokenizer_;
  static std::shared_ptr<const grammar::TokenVocabulary> vocab_;
};

Tokenizer* ToolCallGrammarV4Test::tokenizer_ = nullptr;
std::shared_ptr<const grammar::TokenVocabulary> ToolCallGrammarV4Test::vocab_;

TEST_F(ToolCallGrammarV4Test, ForcedCallsParseIntoDeclaredToolsWithValidArguments) {
  size_t n_calls = 0, n_raw = 0;
  for (const auto& [choice, function] : std::vector<std::pair<std::string, std::string>>{
           {"required", ""}, {"function", "get_weather"}, {"function", "get"}}) {
    const grammar::CompiledGrammar g = compile(choice, function);
    for (chat::ThinkingMode mode : {chat::ThinkingMode::kChat, chat::ThinkingMode::kThinking}) {
      const std::string prefix = chat::deepseek_v4_forced_tool_call_prefix(mode, choice, function);
      for (uint64_t seed = 0; seed < 6; ++seed) {
        const std::string text = walk(g, seed, seed == 0 && mode == chat::ThinkingMode::kChat ? 12 : 0);
        SCOPED_TRACE(prefix + text);
        auto m = chat::parse_deepseek_v4_completion(prefix + text + std::string(chat::dsv4::kEos),
                                                    mode == chat::ThinkingMode::kThinking,
                                                    [] { return std::string("call_0"); });
        ASSERT_TRUE(m.ok()) << m.status().message();
        EXPECT_EQ(m->content, "");
        EXPECT_EQ(m->reasoning, "");
        ASSERT_FALSE(m->tool_calls.empty());
        for (const chat::ToolCall& call : m->tool_calls) {
          if (choice == "function") {
            EXPECT_EQ(call.name, function);
          }
          check_arguments(call.name, call.arguments);
          ++n_calls;
        }
        n_raw += text.find("string=\"true\"") != std::string::npos;
      }
    }
  }
  EXPECT_GE(n_calls, 36u);
  EXPECT_GT(n_raw, 0u);  // raw string parameters were written
}

TEST_F(ToolCallGrammarV4Test, AutoLetsTextOrCallsCome) {
  const grammar::CompiledGrammar g = compile("auto", "");
  int n_with_calls = 0;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    // Odd seeds start the block, so that calls come after text.
    const std::string text = walk(g, seed, seed < 2 ? 12 : 0, seed % 2 ? "Sure.\n\n<｜DSML｜tool_calls" : "");
    const chat::DeepseekV4Message m = parse(text);
    SCOPED_TRACE(text);
    const size_t block = text.find(chat::dsv4::kToolCallsStart);
    EXPECT_EQ(m.content, text.substr(0, block));
    EXPECT_EQ(block == std::string::npos, m.tool_calls.empty());
    n_with_calls += !m.tool_calls.empty();
    for (const chat::ToolCall& call : m.tool_calls) check_arguments(call.name, call.arguments);
  }
  EXPECT_EQ(n_with_calls, 6);
  // Text alone, ended where the model ends it; no markup or special text in it.
  GrammarAutomaton a(g.grammar());
  const auto accepts = [&](const std::string& t) {
    const int32_t s = a.walk(a.initial_state(), t);
    return s != GrammarAutomaton::kDead && a.accepts(s);
  };
  const std::string block = "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get\">\n\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  EXPECT_TRUE(accepts("hi <b>\n\n<"));
  EXPECT_TRUE(accepts("hi" + block));
  EXPECT_TRUE(accepts(block));
  EXPECT_FALSE(accepts("hi </think>"));
  EXPECT_FALSE(accepts("a｜b"));
  EXPECT_FALSE(accepts("hi" + std::string(chat::dsv4::kEos)));
  EXPECT_FALSE(accepts("hi" + block + "\n"));
  // As DeepSeek's encoder writes a call: string parameters raw, others JSON; required ones present.
  const std::string call =
      "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
      "<｜DSML｜parameter name=\"city\" string=\"true\">a<\"b</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"days\" string=\"false\">3</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"note\" string=\"false\">null</｜DSML｜parameter>\n"
      "</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  EXPECT_TRUE(accepts(call));
  std::string no_days = call;
  no_days.erase(no_days.find("<｜DSML｜parameter name=\"days\""), no_days.find("<｜DSML｜parameter name=\"note\"") -
                                                                   no_days.find("<｜DSML｜parameter name=\"days\""));
  EXPECT_FALSE(accepts(no_days));
  std::string string_days = call;
  string_days.replace(string_days.find("\"days\" string=\"false\""), 21, "\"days\" string=\"true\"");
  EXPECT_FALSE(accepts(string_days));
}

TEST_F(ToolCallGrammarV4Test, WithAContentSchemaTheAnswerIsThatJsonOrCalls) {
  const json content = json::parse(R"({"type": "object", "properties": {"answer": {"type": "string", "maxLength": 6}},
                                       "required": ["answer"], "additionalProperties": false})");
  auto text = tool_call_constraint_text(ToolCallFormat::kDeepseekV4, "auto", "", kTools, content);
  ASSERT_TRUE(text.ok()) << text.status().message();
  auto g = compile_tool_call_grammar(text.value(), {});
  ASSERT_TRUE(g.ok()) << g.status().message();
  int n_json = 0, n_calls = 0;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    // Odd seeds open the calls block; the others mostly write the JSON.
    const std::string out = walk(g.value(), seed, seed < 2 ? 6 : 0, seed % 2 ? "\n\n<｜DSML｜tool_calls" : "");
    const chat::DeepseekV4Message m = parse(out);
    SCOPED_TRACE(out);
    if (m.tool_calls.empty()) {
      const json answer = json::parse(m.content, nullptr, false);
      ASSERT_TRUE(answer.is_object() && answer.size() == 1 && answer["answer"].is_string());
      ++n_json;
    } else {
      EXPECT_EQ(m.content, "");
      for (const chat::ToolCall& call : m.tool_calls) check_arguments(call.name, call.arguments);
      ++n_calls;
    }
  }
  EXPECT_GT(n_json, 0);
  EXPECT_GE(n_calls, 4);
}

TEST_F(ToolCallGrammarV4Test, BadNamesNameTheirField) {
  const auto error = [](const json& tools) -> std::string {
    auto text = tool_call_constraint_text(ToolCallFormat::kDeepseekV4, "auto", "", tools);
    if (!text.ok()) return text.status().message();
    auto g = compile_tool_call_grammar(text.value(), {});
    return g.ok() ? "" : g.status().message();
  };
  const auto tool = [](const std::string& name, const json& parameters) {
    json f = {{"name", name}, {"strict", true}};
    if (!parameters.is_null()) f["parameters"] = parameters;
    return json{{"type", "function"}, {"function", f}};
  };
  EXPECT_NE(error(json::array({tool("a\"b", nullptr)})).find("'tools[0].function.name'"), std::string::npos);
  EXPECT_NE(error(json::array({tool("a", nullptr), tool("b", json::parse(R"({"properties": {"x\"y": {}}})"))}))
                .find("'tools[1].function.parameters': property name 'x\"y'"),
            std::string::npos);
  EXPECT_NE(error(json::array({tool("a", json::parse(R"({"type": "object"})"))}))
                .find("'tools[0].function.parameters': 'additionalProperties'"),
            std::string::npos);
  EXPECT_NE(error(json::array({tool("a", json::parse(R"({"anyOf": [{"properties": {}}]})"))}))
                .find("'tools[0].function.parameters': 'anyOf'"),
            std::string::npos);
  EXPECT_EQ(error(kTools), "");
}

}  // namespace
}  // namespace deepinfer
