// DeepSeek-V4 chat completions: the prompt by DeepSeek's encoder (chat/deepseek_v4_encoder.h)
// for checkpoints whose prompt format is kDeepseekV4, from a parsed ChatRequest, with the
// request mapping of chat/deepseek_v4_request.h (thinking mode, reasoning effort, forced calls).
// Tools are rendered unless tool_choice is "none"; add_generation_prompt does not apply (the
// encoder opens the assistant turn after a user or tool turn).
#pragma once

#include <string>

#include "server/openai_request.h"

namespace deepinfer {

struct DeepseekV4Chat {
  std::string prompt;         // to tokenize without added special tokens (it holds its BOS)
  std::string forced_prefix;  // tool_choice required / named: the DSML call opening, after the prompt
  bool thinking = false;      // thinking mode: the prompt opened <think>
};

// Errors are 400s naming the field at fault (messages, reasoning_effort, chat_template_kwargs).
ApiResult<DeepseekV4Chat> render_deepseek_v4_chat(const ChatRequest& r);

}  // namespace deepinfer
