#include "chat/deepseek_v4_request.h"

#include "chat/deepseek_v4_markup.h"

namespace deepinfer::chat {

Result<DeepseekV4Options> deepseek_v4_request_options(const std::string& reasoning_effort,
                                                      const nlohmann::ordered_json& kwargs) {
  DeepseekV4Options options;
  std::string effort = reasoning_effort;
  std::string effort_field = "reasoning_effort";
  if (effort.empty() && kwargs.is_object() && kwargs.contains("reasoning_effort")) {
    if (!kwargs["reasoning_effort"].is_string()) {
      return Status::Error("chat_template_kwargs.reasoning_effort must be a string").with_field("chat_template_kwargs");
    }
    effort = kwargs["reasoning_effort"];
    effort_field = "chat_template_kwargs";
  }
  if (effort == "high" || effort == "max") {
    options.reasoning_effort = effort;
  } else if (!effort.empty() && effort != "none" && effort != "minimal" && effort != "low" && effort != "medium") {
    return Status::Error("reasoning_effort must be one of none, minimal, low, medium, high, max; got '" + effort + "'")
        .with_field(effort_field);
  }
  bool thinking = !effort.empty() && effort != "none";
  if (kwargs.is_object() && kwargs.contains("thinking")) {
    if (!kwargs["thinking"].is_boolean()) {
      return Status::Error("chat_template_kwargs.thinking must be true or false").with_field("chat_template_kwargs");
    }
    thinking = kwargs["thinking"].get<bool>();
  }
  if (kwargs.is_object() && kwargs.contains("drop_thinking")) {
    if (!kwargs["drop_thinking"].is_boolean()) {
      return Status::Error("chat_template_kwargs.drop_thinking must be true or false").with_field("chat_template_kwargs");
    }
    options.drop_thinking = kwargs["drop_thinking"].get<bool>();
  }
  options.thinking_mode = thinking ? ThinkingMode::kThinking : ThinkingMode::kChat;
  return options;
}

std::string deepseek_v4_forced_tool_call_prefix(ThinkingMode mode, const std::string& tool_choice,
                                                const std::string& function) {
  if (tool_choice != "required" && tool_choice != "function") return "";
  std::string prefix = mode == ThinkingMode::kThinking ? std::string(dsv4::kThinkEnd) : std::string();
  prefix += std::string(dsv4::kToolCallsStart) + ">\n" + std::string(dsv4::kInvokeOpen) + " name=\"";
  if (tool_choice == "function") prefix += function + "\">\n";
  return prefix;
}

}  // namespace deepinfer::chat
