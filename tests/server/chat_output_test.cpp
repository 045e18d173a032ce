// ChatOutput: the server's split of generated text into content, reasoning and tool calls,
// through the chat module's parsers. Inputs follow DeepSeek's published output formats (R1's
// <think> ... </think>, V3's tool-call markers); expected values are those formats' meaning.
#include "server/chat_output.h"

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

ChatDelta run_all(ChatOutput& out, const std::string& text, size_t piece) {
  ChatDelta all;
  for (size_t i = 0; i < text.size(); i += piece) {
    ChatDelta d = out.push(text.substr(i, piece));
    all.content += d.content;
    all.reasoning += d.reasoning;
    for (auto& t : d.tool_calls) all.tool_calls.push_back(t);
  }
  ChatDelta d = out.finish();
  all.content += d.content;
  all.reasoning += d.reasoning;
  for (auto& t : d.tool_calls) all.tool_calls.push_back(t);
  return all;
}

TEST(ChatOutput, ReasoningThenContent) {
  for (size_t piece : {1, 3, 100}) {
    ChatOutput out({true, true, false, ""});
    ChatDelta d = run_all(out, "let me think</think>\n\nThe answer.", piece);
    EXPECT_EQ(d.reasoning, "let me think");
    EXPECT_EQ(d.content, "The answer.");
  }
}

TEST(ChatOutput, ToolCallAfterForcedPrefix) {
  const std::string prefix = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n";
  ChatOutput out({false, false, true, prefix});
  ChatDelta d = run_all(out, "{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", 2);
  EXPECT_EQ(d.content, "");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(d.tool_calls[0]["function"]["arguments"], "{\"city\": \"Paris\"}");
  EXPECT_TRUE(out.saw_tool_calls());
}

TEST(ChatOutput, PlainContentWithoutParsers) {
  ChatOutput out({false, false, false, ""});
  ChatDelta d = run_all(out, "<think>not parsed</think>", 4);
  EXPECT_EQ(d.content, "<think>not parsed</think>");
  EXPECT_FALSE(out.saw_tool_calls());
}

}  // namespace
}  // namespace deepinfer
