// Strict tool arguments (server/tool_call_grammar.h) over the DeepSeek-V3 vocabulary: random
// token walks under the grammar, decoded and read back by the tool-call parser the server uses
// (chat::ToolCallParser) after the forced prefix of server/tool_choice.h, give calls of declared
// tools whose arguments satisfy the tool's schema; the matcher's masks equal a brute-force
// reference (each token's bytes walked through a separate automaton); bad tools name their field.
#include "server/tool_call_grammar.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "chat/deepseek_v3_markup.h"
#include "chat/tool_call_parser.h"
#include "grammar/grammar_automaton.h"
#include "grammar/grammar_matcher.h"
#include "grammar/token_vocabulary.h"
#include "tokenizer/tokenizer.h"

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

  static bool allowed(const std::vector<uint32_t>& mask, int32_t id) { return (mask[size_t(id) / 32] >> (id % 32)) & 1; }

  // Every token's verdict by walking its bytes from the state after `text` in a fresh automaton.
  static void expect_brute_force_mask(const grammar::CompiledGrammar& g, const std::string& text,
                                      const std::vector<uint32_t>& mask) {
    GrammarAutomaton a(g.grammar());
    const int32_t state = a.walk(a.initial_state(), text);
    ASSERT_NE(state, GrammarAutomaton::kDead);
    size_t n_wrong = 0;
    for (size_t id = 0; id < vocab_->size(); ++id) {
      const std::string& t = vocab_->bytes(int32_t(id));
      const bool ok = vocab_->is_end(int32_t(id)) ? a.accepts(state)
                                                  : !t.empty() && a.walk(state, t) != GrammarAutomaton::kDead;
      n_wrong += ok != allowed(mask, int32_t(id));
    }
    EXPECT_EQ(n_wrong, 0u) << "after " << text;
  }

  // A random walk of allowed tokens, steered toward an end: of a few random allowed tokens (and
  // the tool-call markers when allowed), mostly the one that leaves the fewest bytes to the end.
  // Returns the generated text (decoded); checks masks by brute force at `n_checked` steps.
  static std::string walk(const grammar::CompiledGrammar& g, uint64_t seed, int n_checked) {
    grammar::GrammarMatcher m(g, vocab_);
    std::mt19937_64 rng(seed);
    std::vector<uint32_t> mask(vocab_->bitmask_words());
    std::vector<int32_t> ids;
    std::string bytes;
    std::vector<int32_t> markers;
    for (std::string_view s : {chat::dsv3::kCallsBegin, chat::dsv3::kCallBegin, chat::dsv3::kCallEnd,
                               chat::dsv3::kCallsEnd, chat::dsv3::kSep})
      markers.push_back(*tokenizer_->token_to_id(s));
    for (int step = 0; step < 400 && !m.is_terminated(); ++step) {
      m.fill_next_token_bitmask(mask.data());
      if (step < n_checked) expect_brute_force_mask(g, bytes, mask);
      std::vector<int32_t> candidates;
      for (int32_t id : markers)
        if (allowed(mask, id)) candidates.push_back(id);
      for (int32_t id : vocab_->end_ids())
        if (allowed(mask, id)) candidates.push_back(id);
      std::vector<int32_t> all;
      for (size_t id = 0; id < vocab_->size(); ++id)
        if (allowed(mask, int32_t(id))) all.push_back(int32_t(id));
      for (int k = 0; k < 12 && !all.empty(); ++k) candidates.push_back(all[rng() % all.size()]);
      EXPECT_FALSE(candidates.empty());
      if (candidates.empty()) break;
      int32_t pick = candidates[rng() % candidates.size()];
      if (rng() % 4 != 0) {
        uint32_t best = UINT32_MAX;
        for (int32_t id : candidates) {
          EXPECT_TRUE(m.accept_token(id)) << id;
          const uint32_t left = m.min_bytes_to_end();
          m.rollback(1);
          if (left < best) best = left, pick = id;
        }
      }
      EXPECT_TRUE(m.accept_token(pick));
      if (vocab_->is_end(pick)) break;
      ids.push_back(pick);
      bytes += vocab_->bytes(pick);
    }
    EXPECT_TRUE(m.can_end()) << bytes;
    auto text = tokenizer_->decode(ids, /*skip_special_tokens=*/true);
    EXPECT_TRUE(text.ok());
    EXPECT_EQ(text.value(), bytes);
    return bytes;
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
