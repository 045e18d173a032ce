// tool_choice forcing: the format is found by rendering DeepSeek's own templates (V3 and V3.1,
// as published with their checkpoints; copies in tests/data/chat/templates), and the forced
// prefixes follow the call layouts those templates produce.
#include "server/tool_choice.h"

#include <gtest/gtest.h>

#include "core/mapped_file.h"

namespace deepinfer {
namespace {

chat::ChatTemplate load(const std::string& file) {
  nlohmann::ordered_json config = {{"bos_token", "<｜begin▁of▁sentence｜>"}, {"eos_token", "<｜end▁of▁sentence｜>"}};
  config["chat_template"] = read_text_file("tests/data/chat/templates/" + file).value();
  auto t = chat::ChatTemplate::FromConfig(config);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return std::move(t).value();
}

TEST(ToolChoice, DetectsDeepseekFormats) {
  EXPECT_EQ(detect_tool_call_format(load("deepseek-v3.jinja")), ToolCallFormat::kDeepseekV3);
  EXPECT_EQ(detect_tool_call_format(load("deepseek-v3.1.jinja")), ToolCallFormat::kDeepseekV31);
  EXPECT_EQ(detect_tool_call_format(load("qwen2.5-7b-instruct.jinja")), ToolCallFormat::kUnknown);
}

TEST(ToolChoice, Prefixes) {
  EXPECT_EQ(forced_tool_call_prefix(ToolCallFormat::kDeepseekV3, "function", "get_weather"),
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n");
  EXPECT_EQ(forced_tool_call_prefix(ToolCallFormat::kDeepseekV3, "required", ""),
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>");
  EXPECT_EQ(forced_tool_call_prefix(ToolCallFormat::kDeepseekV31, "function", "f"),
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>");
  EXPECT_EQ(forced_tool_call_prefix(ToolCallFormat::kDeepseekV31, "auto", "f"), "");
  EXPECT_EQ(forced_tool_call_prefix(ToolCallFormat::kUnknown, "required", ""), "");
}

}  // namespace
}  // namespace deepinfer
