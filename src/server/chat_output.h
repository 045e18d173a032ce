// ChatOutput: splits a chat completion's generated text into `content`, `reasoning_content` and
// OpenAI `tool_calls`, as deltas while streaming. Built on the chat module's reasoning and
// tool-call parsers (DeepSeek <think> ... </think> and <｜tool▁calls▁begin｜> formats), or, for
// DeepSeek-V4, on its output parser (<think> ... </think> and DSML tool calls).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace deepinfer {

struct ChatOutputConfig {
  bool parse_reasoning = false;      // the model emits <think> ... </think>
  bool reasoning_open = false;       // the prompt already opened <think>
  bool parse_tool_calls = false;     // tools were offered and tool_choice is not "none"
  std::string forced_prefix;         // text the server put at the start of the answer (tool_choice)
  bool deepseek_v4 = false;          // DeepSeek-V4's format; reasoning_open says thinking mode
};

struct ChatDelta {
  std::string content;
  std::string reasoning;
  nlohmann::json tool_calls = nlohmann::json::array();  // OpenAI delta entries: index, id, type, function
  bool empty() const { return content.empty() && reasoning.empty() && tool_calls.empty(); }
};

class ChatOutput {
 public:
  explicit ChatOutput(const ChatOutputConfig& config);
  ~ChatOutput();
  ChatDelta push(const std::string& text);
  ChatDelta finish();              // end of generation: whatever was held back
  bool saw_tool_calls() const;     // at least one complete tool call was parsed

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer
