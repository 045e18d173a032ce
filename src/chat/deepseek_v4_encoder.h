// DeepSeek-V4's prompt encoder: OpenAI-style messages to the prompt text, byte for byte as
// DeepSeek's own encoding_dsv4.py (encode_messages) writes it. V4 checkpoints ship this encoder
// instead of a Jinja chat template.
//
// Input: a JSON array of messages. Roles: system, developer, user, assistant, tool (folded into
// the next user turn as <tool_result> blocks, sorted by the order of the preceding assistant's
// tool_calls), latest_reminder. Fields the encoder reads:
//   system / developer: content, tools (OpenAI [{"type": "function", "function": {...}}]),
//                       response_format
//   user:               content, task ("action", "query", "authority", "domain", "title",
//                       "read_url")
//   assistant:          content, reasoning_content, tool_calls ([{"id", "function": {"name",
//                       "arguments"}}], arguments a JSON object or its JSON text), wo_eos, task
//   tool:               content (text, or a list of parts: text parts are kept, other parts
//                       become "[Unsupported TYPE]"), tool_call_id
//   latest_reminder:    content
// Content is a string, null, or (system, developer, user, assistant) a list of text parts,
// concatenated. Other fields are ignored, as DeepSeek's encoder ignores them.
//
// Errors (a Status naming the message): unknown roles, content parts of other types, tool-call
// arguments that are not a JSON object, a tool result whose tool_call_id matches no call of the
// preceding assistant turn, an empty developer message, unknown tasks and reasoning efforts.
// DeepSeek's encoder accepts some of these silently (non-JSON arguments, unmatched results).
//
// Thread-safe: free functions of their arguments.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace deepinfer::chat {

enum class ThinkingMode { kChat, kThinking };

// encode_messages' keyword arguments, with its defaults.
struct DeepseekV4Options {
  ThinkingMode thinking_mode = ThinkingMode::kChat;
  bool drop_thinking = true;          // drop reasoning of turns before the last user turn (not with tools)
  bool add_default_bos_token = true;  // BOS first, unless there is a context
  std::string reasoning_effort;       // "", "high" or "max" ("max" adds a prompt in thinking mode)
  nlohmann::ordered_json context = nlohmann::ordered_json::array();  // earlier messages, not rendered

  // From golden.jsonl's "thinking_mode" ("chat" or "thinking") and "options" object (keys
  // drop_thinking, add_default_bos_token, reasoning_effort, context); unknown keys are errors.
  static Result<DeepseekV4Options> FromJson(const std::string& thinking_mode, const nlohmann::ordered_json& options);
};

// The prompt for `messages`. `tools` (an OpenAI tools array, or null) are the request-level tools:
// they go on the first message when it is a system message, else on a new empty system message
// put first (the golden's tool conversations have this shape).
Result<std::string> encode_deepseek_v4(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                       const DeepseekV4Options& options);

}  // namespace deepinfer::chat
