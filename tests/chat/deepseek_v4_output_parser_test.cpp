// DeepseekV4OutputParser against DeepSeek's own parser: every "parse" case of
// tests/data/chat/deepseek-v4/golden.jsonl (see deepseek_v4_golden.h; parse_message_from_completion_text
// gave `parsed`, or raised for `error`), for the whole completion, at every two-chunk split, byte
// by byte, and token by token (the V4 tokenizer's pieces); then malformed markup, which falls
// back to content.
#include <gtest/gtest.h>

#include <cstdlib>

#include "chat/deepseek_v4_output_parser.h"
#include "deepseek_v4_golden.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::chat {
namespace {

using ojson = nlohmann::ordered_json;
using testing::v4_golden;

std::string counting_ids() {
  static int n = 0;
  return "call_" + std::to_string(n++);
}

struct Collected {
  DeepseekV4Message message;
  std::string error;
};

Collected feed_chunks(const std::vector<std::string>& chunks, bool thinking, bool tools = true) {
  DeepseekV4OutputParser parser(thinking, tools, counting_ids);
  Collected c;
  auto add = [&](DeepseekV4Delta d) {
    c.message.reasoning += d.reasoning;
    c.message.content += d.content;
    for (ToolCall& call : d.tool_calls) c.message.tool_calls.push_back(std::move(call));
  };
  for (const std::string& chunk : chunks) add(parser.feed(chunk));
  add(parser.finish());
  c.error = parser.error();
  return c;
}

void expect_matches_golden(const ojson& row, const Collected& got, const std::string& how) {
  const std::string name = row["name"].get<std::string>() + " (" + how + ")";
  if (row.contains("error")) {
    EXPECT_FALSE(got.error.empty()) << name << ": DeepSeek's parser raises " << row["error"];
    return;
  }
  EXPECT_EQ(got.error, "") << name;
  const ojson& parsed = row["parsed"];
  EXPECT_EQ(got.message.content, parsed["content"].get<std::string>()) << name;
  EXPECT_EQ(got.message.reasoning, parsed["reasoning_content"].get<std::string>()) << name;
  ASSERT_EQ(got.message.tool_calls.size(), parsed["tool_calls"].size()) << name;
  for (size_t i = 0; i < got.message.tool_calls.size(); ++i) {
    const ToolCall& call = got.message.tool_calls[i];
    EXPECT_EQ(call.index, static_cast<int>(i)) << name;
    EXPECT_EQ(call.type, "function") << name;
    EXPECT_EQ(call.name, parsed["tool_calls"][i]["function"]["name"].get<std::string>()) << name;
    EXPECT_EQ(call.arguments, parsed["tool_calls"][i]["function"]["arguments"].get<std::string>()) << name;
  }
}

bool thinking_of(const ojson& row) { return row["thinking_mode"] == "thinking"; }

TEST(DeepseekV4OutputParser, EveryGoldenCaseWhole) {
  const auto rows = v4_golden("parse");
  ASSERT_EQ(rows.size(), 9u);
  for (const ojson& row : rows) {
    expect_matches_golden(row, feed_chunks({row["completion"].get<std::string>()}, thinking_of(row)), "whole");
    auto parsed = parse_deepseek_v4_completion(row["completion"].get<std::string>(), thinking_of(row));
    EXPECT_EQ(parsed.ok(), !row.contains("error")) << row["name"];
  }
}

TEST(DeepseekV4OutputParser, EveryGoldenCaseAtEverySplit) {
  for (const ojson& row : v4_golden("parse")) {
    const std::string text = row["completion"];
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      const Collected got = feed_chunks({text.substr(0, cut), text.substr(cut)}, thinking_of(row));
      expect_matches_golden(row, got, "split at byte " + std::to_string(cut));
    }
    std::vector<std::string> bytes;
    for (char ch : text) bytes.emplace_back(1, ch);
    expect_matches_golden(row, feed_chunks(bytes, thinking_of(row)), "byte by byte");
  }
}

TEST(DeepseekV4OutputParser, EveryGoldenCaseTokenByToken) {
  auto tokenizer = Tokenizer::Load(testing::kV4TokenizerDir);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().message();
  for (const ojson& row : v4_golden("parse")) {
    std::vector<std::string> pieces;
    std::string joined;
    for (const int32_t id : row["ids"].get<std::vector<int32_t>>()) {
      auto piece = tokenizer->decode(std::vector<int32_t>{id}, /*skip_special_tokens=*/false);
      ASSERT_TRUE(piece.ok());
      pieces.push_back(*piece);
      joined += *piece;
    }
    if (joined != row["completion"].get<std::string>()) continue;  // a piece splits a UTF-8 character
    expect_matches_golden(row, feed_chunks(pieces, thinking_of(row)), "token by token");
  }
}

const std::string kCall =
    "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n"
    "<｜DSML｜parameter name=\"n\" string=\"false\">1</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";

TEST(DeepseekV4OutputParser, MalformedCallsFallBackToContent) {
  const std::string eos = "<｜end▁of▁sentence｜>";
  const std::vector<std::string> malformed = {
      // a duplicate parameter, a non-JSON string="false" value, a missing ">\n", a cut-off block
      "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"n\" string=\"true\">1"
      "</｜DSML｜parameter>\n<｜DSML｜parameter name=\"n\" string=\"true\">2</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
      "</｜DSML｜tool_calls>" + eos,
      "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"n\" string=\"false\">one"
      "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>" + eos,
      "\n\n<｜DSML｜tool_calls><｜DSML｜invoke name=\"f\">\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>" + eos,
      "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"n\" string=\"true\">1",
  };
  for (const std::string& text : malformed) {
    for (size_t cut = 0; cut <= text.size(); ++cut) {
      const Collected got = feed_chunks({"Sure." + text.substr(0, cut), text.substr(cut)}, false);
      EXPECT_NE(got.error, "") << text;
      EXPECT_TRUE(got.message.tool_calls.empty()) << text;
      // Nothing is dropped but the end-of-sentence marker.
      const std::string expected = "Sure." + (text.ends_with(eos) ? text.substr(0, text.size() - eos.size()) : text);
      EXPECT_EQ(got.message.content, expected) << "cut " << cut;
    }
  }
}

TEST(DeepseekV4OutputParser, CallsBeforeAMalformedOneStay) {
  // The first call is emitted; the broken second one and what follows become content.
  const std::string broken = "<｜DSML｜invoke name=\"g\">\nbad</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  const std::string text = kCall.substr(0, kCall.size() - std::string("</｜DSML｜tool_calls>").size()) + broken;
  const Collected got = feed_chunks({text}, false);
  ASSERT_EQ(got.message.tool_calls.size(), 1u);
  EXPECT_EQ(got.message.tool_calls[0].arguments, "{\"n\": 1}");
  EXPECT_EQ(got.message.content, ">\n" + broken);
  EXPECT_NE(got.error, "");
}

TEST(DeepseekV4OutputParser, WithoutToolsMarkupIsContent) {
  const Collected got = feed_chunks({"A" + kCall}, false, /*tools=*/false);
  EXPECT_EQ(got.message.content, "A" + kCall);
  EXPECT_TRUE(got.message.tool_calls.empty());
}

TEST(DeepseekV4OutputParser, TruncatedOutputKeepsItsText) {
  // max_tokens: no end of sentence; the text is still reasoning (no </think> yet) or content.
  Collected got = feed_chunks({"still thinking"}, true);
  EXPECT_EQ(got.message.reasoning, "still thinking");
  EXPECT_EQ(got.error, "missing </think>");
  got = feed_chunks({"line\n"}, false);
  EXPECT_EQ(got.message.content, "line\n");
  EXPECT_EQ(got.error, "missing end of sentence");
}

}  // namespace
}  // namespace deepinfer::chat
