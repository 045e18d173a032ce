// How an OpenAI chat completion request drives DeepSeek-V4's encoder and output.
//
// Thinking mode: off (chat mode) by default; on when the request sets `reasoning_effort` (other
// than "none") or chat_template_kwargs {"thinking": true}; chat_template_kwargs
// {"thinking": false} forces chat mode whatever the effort. Effort: "high" and "max" are
// DeepSeek's own levels ("max" adds its effort prompt); "none", "minimal", "low" and "medium"
// add nothing. chat_template_kwargs may also set "reasoning_effort" (when the request does not)
// and "drop_thinking" (a boolean, default true); other keys are ignored.
//
// tool_choice "required" and a named function start the answer with the DSML call opening (and
// the name), so the model must continue a call; in thinking mode the opening closes the
// (empty) reasoning first.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "chat/deepseek_v4_encoder.h"
#include "core/status.h"

namespace deepinfer::chat {

// reasoning_effort: the request's field, "" when absent. Errors carry the field at fault.
Result<DeepseekV4Options> deepseek_v4_request_options(const std::string& reasoning_effort,
                                                      const nlohmann::ordered_json& chat_template_kwargs);

// tool_choice: "auto", "none", "required" or "function" (then `function` is its name). Empty for
// "auto" and "none".
std::string deepseek_v4_forced_tool_call_prefix(ThinkingMode mode, const std::string& tool_choice,
                                                const std::string& function);

}  // namespace deepinfer::chat
