// ToolCallParser. The well-formed inputs are assistant turns as the DeepSeek templates render them
// (tests/data/chat/reference/deepseek-v3.jsonl and deepseek-r1.jsonl for V3/R1's
// "function<｜tool▁sep｜>NAME\n```json\nARGS\n```" calls, deepseek-v3.1.jsonl for V3.1's
// "NAME<｜tool▁sep｜>ARGS"); the expected calls are the tool_calls those turns were rendered from.
// Malformed inputs and their expected content follow the contract in
// src/chat/tool_call_parser.h. Every input is also streamed cut at every byte position, byte by
// byte, and in three pieces, and must give the same result.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat/tool_call_parser.h"

namespace deepinfer::chat {
namespace {

struct Expected {
  std::string name;
  std::string arguments;
};

struct Case {
  std::string text;
  std::string content;
  std::vector<Expected> calls;
};

const std::string B = "<｜tool▁calls▁begin｜>";
const std::string E = "<｜tool▁calls▁end｜>";
const std::string CB = "<｜tool▁call▁begin｜>";
const std::string CE = "<｜tool▁call▁end｜>";
const std::string S = "<｜tool▁sep｜>";

std::vector<Case> cases() {
  const std::string v3_paris = CB + "function" + S + "get_weather\n```json\n{\"city\": \"Paris\"}\n```" + CE;
  const std::string v3_lima = CB + "function" + S + "get_weather\n```json\n{\"city\": \"Lima\", \"days\": 2}\n```" + CE;
  const std::string v31_tokyo = CB + "get_weather" + S + "{\"city\": \"東京\", \"unit\": \"celsius\"}" + CE;
  const std::string v31_cats = CB + "search" + S + "{\"query\": \"cats\", \"tags\": [\"pets\"]}" + CE;
  return {
      {B + v3_paris + E, "", {{"get_weather", "{\"city\": \"Paris\"}"}}},
      {B + v3_paris + "\n" + v3_lima + E, "",
       {{"get_weather", "{\"city\": \"Paris\"}"}, {"get_weather", "{\"city\": \"Lima\", \"days\": 2}"}}},
      {"Let me check." + B + v31_tokyo + v31_cats + E, "Let me check.",
       {{"get_weather", "{\"city\": \"東京\", \"unit\": \"celsius\"}"}, {"search", "{\"query\": \"cats\", \"tags\": [\"pets\"]}"}}},
      {B + CB + "function" + S + "{\"a\": 1}" + CE + E, "", {{"function", "{\"a\": 1}"}}},
      {"No tools, just <｜tool▁ text and < signs.", "No tools, just <｜tool▁ text and < signs.", {}},
      {"Plain answer.", "Plain answer.", {}},
      {B + v31_cats + E + " Done.", " Done.", {{"search", "{\"query\": \"cats\", \"tags\": [\"pets\"]}"}}},
      // Malformed: returned as content from the first call not emitted.
      {"Hi" + B + CB + "search" + S + "{not json}" + CE + E, "Hi" + B + CB + "search" + S + "{not json}" + CE + E,
       {}},
      {B + CB + "search{\"q\": 1}" + CE + E, B + CB + "search{\"q\": 1}" + CE + E, {}},
      {B + CB + "search" + S + "[1, 2]" + CE + E, B + CB + "search" + S + "[1, 2]" + CE + E, {}},
      {B + v31_cats + CB + "broken" + S + "{\"x\": " + CE + E,
       CB + "broken" + S + "{\"x\": " + CE + E,
       {{"search", "{\"query\": \"cats\", \"tags\": [\"pets\"]}"}}},
      {B + "garbage" + v31_cats + E, B + "garbage" + v31_cats + E, {}},
      {B + CB + "search" + S + "{\"query\": \"cut off", B + CB + "search" + S + "{\"query\": \"cut off", {}},
      {B + v31_cats + "\n", "\n", {{"search", "{\"query\": \"cats\", \"tags\": [\"pets\"]}"}}},
      {"x" + B, "x" + B, {}},
      {B + E + "y", B + E + "y", {}},
  };
}

ToolCallParser::IdGenerator counter() {
  auto n = std::make_shared<int>(0);
  return [n] { return "id" + std::to_string((*n)++); };
}

ToolCallDelta stream(const std::vector<std::string_view>& pieces) {
  ToolCallParser p(counter());
  ToolCallDelta all;
  for (std::string_view piece : pieces) {
    ToolCallDelta d = p.feed(piece);
    all.content += d.content;
    for (auto& c : d.tool_calls) all.tool_calls.push_back(c);
  }
  ToolCallDelta d = p.finish();
  all.content += d.content;
  for (auto& c : d.tool_calls) all.tool_calls.push_back(c);
  return all;
}

void expect_result(const ToolCallDelta& got, const Case& c, const std::string& where) {
  EXPECT_EQ(got.content, c.content) << where;
  ASSERT_EQ(got.tool_calls.size(), c.calls.size()) << where;
  for (size_t i = 0; i < c.calls.size(); ++i) {
    EXPECT_EQ(got.tool_calls[i].index, static_cast<int>(i)) << where;
    EXPECT_EQ(got.tool_calls[i].id, "id" + std::to_string(i)) << where;
    EXPECT_EQ(got.tool_calls[i].type, "function") << where;
    EXPECT_EQ(got.tool_calls[i].name, c.calls[i].name) << where;
    EXPECT_EQ(got.tool_calls[i].arguments, c.calls[i].arguments) << where;
  }
}

TEST(ToolCallParser, ParsesWholeText) {
  for (const Case& c : cases()) expect_result(parse_tool_calls(c.text, counter()), c, c.text);
}

TEST(ToolCallParser, StreamedAtEveryCut) {
  for (const Case& c : cases()) {
    const std::string_view text = c.text;
    for (size_t i = 0; i <= text.size(); ++i) {
      expect_result(stream({text.substr(0, i), text.substr(i)}), c, c.text + " cut at " + std::to_string(i));
      for (size_t j = i; j <= text.size(); j += 5) {
        expect_result(stream({text.substr(0, i), text.substr(i, j - i), text.substr(j)}), c,
                      c.text + " cut at " + std::to_string(i) + "," + std::to_string(j));
      }
    }
    std::vector<std::string_view> bytes;
    for (size_t i = 0; i < text.size(); ++i) bytes.push_back(text.substr(i, 1));
    expect_result(stream(bytes), c, c.text + " byte by byte");
  }
}

TEST(ToolCallParser, EmitsContentBeforeTheBlockAndEachCallWhenItCloses) {
  ToolCallParser p(counter());
  ToolCallDelta d = p.feed("Checking<｜tool▁calls");
  EXPECT_EQ(d.content, "Checking");
  d = p.feed("▁begin｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>{\"q\": 1}");
  EXPECT_EQ(d.content, "");
  EXPECT_TRUE(d.tool_calls.empty());
  d = p.feed("<｜tool▁call▁end｜>");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].name, "search");
  EXPECT_EQ(d.tool_calls[0].arguments, "{\"q\": 1}");
}

TEST(ToolCallParser, RandomIdsAreOpenAiShaped) {
  const std::string a = random_tool_call_id(), b = random_tool_call_id();
  EXPECT_EQ(a.rfind("call_", 0), 0u);
  EXPECT_EQ(a.size(), 29u);
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace deepinfer::chat
