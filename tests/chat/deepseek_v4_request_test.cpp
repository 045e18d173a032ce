// The OpenAI request mapping for DeepSeek-V4 (deepseek_v4_request.h): thinking mode and effort
// from reasoning_effort and chat_template_kwargs (the rules the issue for V4 chat sets), and the
// forced tool-call opening, which must be the text DeepSeek's encoder writes for a call
// (tests/data/chat/deepseek-v4/golden.jsonl, see deepseek_v4_golden.h) and which the output
// parser must complete into a call.
#include <gtest/gtest.h>

#include "chat/deepseek_v4_output_parser.h"
#include "chat/deepseek_v4_request.h"
#include "deepseek_v4_golden.h"

namespace deepinfer::chat {
namespace {

using ojson = nlohmann::ordered_json;

DeepseekV4Options options(const std::string& effort, const ojson& kwargs) {
  auto o = deepseek_v4_request_options(effort, kwargs);
  EXPECT_TRUE(o.ok()) << o.status().message();
  return o.ok() ? *o : DeepseekV4Options{};
}

TEST(DeepseekV4Request, ThinkingModeAndEffort) {
  EXPECT_EQ(options("", ojson::object()).thinking_mode, ThinkingMode::kChat);
  EXPECT_EQ(options("none", ojson::object()).thinking_mode, ThinkingMode::kChat);
  EXPECT_EQ(options("", {{"thinking", true}}).thinking_mode, ThinkingMode::kThinking);
  EXPECT_EQ(options("", {{"thinking", true}}).reasoning_effort, "");
  const DeepseekV4Options low = options("low", ojson::object());
  EXPECT_EQ(low.thinking_mode, ThinkingMode::kThinking);
  EXPECT_EQ(low.reasoning_effort, "");
  EXPECT_EQ(options("max", ojson::object()).reasoning_effort, "max");
  EXPECT_EQ(options("high", ojson::object()).reasoning_effort, "high");
  EXPECT_EQ(options("max", {{"thinking", false}}).thinking_mode, ThinkingMode::kChat);
  EXPECT_EQ(options("", {{"reasoning_effort", "max"}}).reasoning_effort, "max");
  EXPECT_FALSE(options("", {{"drop_thinking", false}}).drop_thinking);
  EXPECT_TRUE(options("", {{"unrelated", 1}}).drop_thinking);
}

TEST(DeepseekV4Request, BadValuesNameTheirField) {
  auto bad = deepseek_v4_request_options("extreme", ojson::object());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "reasoning_effort");
  bad = deepseek_v4_request_options("", {{"thinking", "yes"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "chat_template_kwargs");
}

// The forced opening is what the encoder writes after the assistant prefix for a call to `name`.
TEST(DeepseekV4Request, ForcedOpeningIsTheEncodersCallText) {
  int n_checked = 0;
  for (const ojson& row : testing::v4_golden("encode")) {
    const std::string rendered = row["rendered"];
    for (const auto& [mode, head] : {std::pair{ThinkingMode::kChat, std::string("<｜Assistant｜></think>")},
                                     std::pair{ThinkingMode::kThinking, std::string("<｜Assistant｜><think>")}}) {
      for (const std::string name : {"get_weather", "read_files", "search"}) {
        const std::string named = deepseek_v4_forced_tool_call_prefix(mode, "function", name);
        if (rendered.find(head + named) == std::string::npos) continue;
        EXPECT_TRUE(named.starts_with(deepseek_v4_forced_tool_call_prefix(mode, "required", "")));
        ++n_checked;
      }
    }
  }
  EXPECT_GE(n_checked, 2);  // tool_args_non_string_types (chat), tool_result_content_blocks (thinking)
  EXPECT_EQ(deepseek_v4_forced_tool_call_prefix(ThinkingMode::kChat, "auto", ""), "");
  EXPECT_EQ(deepseek_v4_forced_tool_call_prefix(ThinkingMode::kChat, "none", ""), "");
}

TEST(DeepseekV4Request, ForcedOpeningPlusTheModelsRestIsACall) {
  for (const ThinkingMode mode : {ThinkingMode::kChat, ThinkingMode::kThinking}) {
    DeepseekV4OutputParser parser(mode == ThinkingMode::kThinking, true, [] { return std::string("call_x"); });
    DeepseekV4Delta forced = parser.feed(deepseek_v4_forced_tool_call_prefix(mode, "required", ""));
    EXPECT_TRUE(forced.content.empty() && forced.reasoning.empty() && forced.tool_calls.empty());
    DeepseekV4Delta rest = parser.feed(
        "f\">\n<｜DSML｜parameter name=\"q\" string=\"true\">x</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
        "</｜DSML｜tool_calls><｜end▁of▁sentence｜>");
    parser.finish();
    ASSERT_EQ(rest.tool_calls.size(), 1u);
    EXPECT_EQ(rest.tool_calls[0].name, "f");
    EXPECT_EQ(rest.tool_calls[0].arguments, "{\"q\": \"x\"}");
    EXPECT_EQ(parser.error(), "");
  }
}

}  // namespace
}  // namespace deepinfer::chat
