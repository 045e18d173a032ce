#include "server/chat_output.h"

#include <optional>

#include "chat/deepseek_v4_output_parser.h"
#include "chat/reasoning_parser.h"
#include "chat/tool_call_parser.h"

namespace deepinfer {

// Text flows through the reasoning parser first; its content part through the tool-call parser.
// DeepSeek-V4 output goes through its own parser, which does both.
struct ChatOutput::Impl {
  std::optional<chat::ReasoningParser> reasoning;
  std::optional<chat::ToolCallParser> tools;
  std::optional<chat::DeepseekV4OutputParser> v4;
  bool saw_tool_calls = false;

  void add_calls(ChatDelta& out, const std::vector<chat::ToolCall>& calls) {
    for (const auto& c : calls) {
      saw_tool_calls = true;
      out.tool_calls.push_back({{"index", c.index},
                                {"id", c.id},
                                {"type", c.type},
                                {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    }
  }

  ChatDelta run_v4(const std::string& text, bool at_end) {
    chat::DeepseekV4Delta d = v4->feed(text);
    if (at_end) {
      chat::DeepseekV4Delta rest = v4->finish();
      d.reasoning += rest.reasoning;
      d.content += rest.content;
      for (auto& c : rest.tool_calls) d.tool_calls.push_back(std::move(c));
    }
    ChatDelta out;
    out.reasoning = std::move(d.reasoning);
    out.content = std::move(d.content);
    add_calls(out, d.tool_calls);
    return out;
  }

  void add_content(ChatDelta& out, const std::string& content, bool at_end) {
    if (!tools) {
      out.content += content;
      return;
    }
    chat::ToolCallDelta d = tools->feed(content);
    if (at_end) {
      chat::ToolCallDelta rest = tools->finish();
      d.content += rest.content;
      for (auto& c : rest.tool_calls) d.tool_calls.push_back(std::move(c));
    }
    out.content += d.content;
    add_calls(out, d.tool_calls);
  }

  ChatDelta run(const std::string& text, bool at_end) {
    if (v4) return run_v4(text, at_end);
    ChatDelta out;
    if (!reasoning) {
      add_content(out, text, at_end);
      return out;
    }
    chat::ReasoningDelta r = reasoning->feed(text);
    if (at_end) {
      chat::ReasoningDelta rest = reasoning->finish();
      r.reasoning += rest.reasoning;
      r.content += rest.content;
    }
    out.reasoning = std::move(r.reasoning);
    add_content(out, r.content, at_end);
    return out;
  }
};

ChatOutput::ChatOutput(const ChatOutputConfig& config) : impl_(std::make_unique<Impl>()) {
  if (config.deepseek_v4) {
    impl_->v4.emplace(config.reasoning_open, config.parse_tool_calls);
    // As below: the forced opening is parsed, not sent (it yields no text of its own).
    if (!config.forced_prefix.empty()) impl_->v4->feed(config.forced_prefix);
    return;
  }
  if (config.parse_reasoning) impl_->reasoning.emplace(config.reasoning_open);
  if (config.parse_tool_calls) impl_->tools.emplace();
  // The forced start of a tool call is part of the answer the parsers see, but is not text the
  // client gets: a call completes (and is emitted whole) only with what the model adds.
  if (!config.forced_prefix.empty() && impl_->tools) impl_->tools->feed(config.forced_prefix);
}

ChatOutput::~ChatOutput() = default;

ChatDelta ChatOutput::push(const std::string& text) { return impl_->run(text, false); }

ChatDelta ChatOutput::finish() { return impl_->run("", true); }

bool ChatOutput::saw_tool_calls() const { return impl_->saw_tool_calls; }

}  // namespace deepinfer
