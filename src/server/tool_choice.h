// tool_choice "required" and named functions for DeepSeek chat templates: the assistant's turn
// is started with the tool-call markers (and the function name), so the model must continue a
// call. The markers' layout is the template's own, found by rendering a probe conversation.
#pragma once

#include <string>

#include "chat/chat_template.h"

namespace deepinfer {

enum class ToolCallFormat {
  kUnknown,     // no DeepSeek tool-call markers: only "auto" and "none" are possible
  kDeepseekV3,  // <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>
  kDeepseekV31, // <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>
  kDeepseekV4,  // DSML (chat/deepseek_v4_markup.h); its prompts come from DeepSeek's encoder, not a template
};

ToolCallFormat detect_tool_call_format(const chat::ChatTemplate& tmpl);

// Text that starts the assistant's answer: for "required" up to where the function name goes,
// for "function" through the name of `function`. Empty for "auto"/"none" (and for DeepSeek-V4,
// whose prefix is chat/deepseek_v4_request.h's).
std::string forced_tool_call_prefix(ToolCallFormat format, const std::string& tool_choice, const std::string& function);

}  // namespace deepinfer
