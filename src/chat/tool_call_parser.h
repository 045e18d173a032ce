// ToolCallParser: finds DeepSeek tool calls in generated text, as the text streams in, and gives
// them in OpenAI's `tool_calls` shape.
//
// Formats (what the DeepSeek chat templates teach the model; whitespace between markers allowed):
//   V3 / R1: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>
//            ... more calls ...<｜tool▁calls▁end｜>
//   V3.1:    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
// ARGS must be a JSON object; the arguments string is ARGS as the model wrote it (trimmed).
//
// Contract:
// - Text outside a tool-calls block is content, verbatim. Markers split across deltas are
//   recognized: only text that may be the start of a marker is held back.
// - A call is emitted whole, in one delta (index, id, type "function", name, arguments), once its
//   <｜tool▁call▁end｜> arrives and it parses; so a malformed call never reaches the client half
//   emitted.
// - Malformed output (a block that does not follow the format, arguments that are not a JSON
//   object, a block cut off by the end of the output) is returned as content: the raw text from
//   the start of the first call not yet emitted, markers included, and everything after it.
//   Nothing is dropped.
// Feeding a text in any split, then calling finish(), gives the same concatenated content and
// calls as parse_tool_calls() on the whole text. Not thread-safe: one parser per request.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::chat {

// One call, complete (the non-streaming result) or as a streaming delta.
struct ToolCall {
  int index = 0;
  std::string id;
  std::string type;  // "function"
  std::string name;
  std::string arguments;  // JSON text
};

struct ToolCallDelta {
  std::string content;
  std::vector<ToolCall> tool_calls;
};

// "call_" followed by 24 random letters and digits.
std::string random_tool_call_id();

class ToolCallParser {
 public:
  using IdGenerator = std::function<std::string()>;
  explicit ToolCallParser(IdGenerator make_id = random_tool_call_id);

  ToolCallDelta feed(std::string_view text);
  // The end of the output: releases held-back text; an unfinished block becomes content.
  ToolCallDelta finish();

 private:
  enum class State { kContent, kBetweenCalls, kInCall, kPassthrough };
  void run(ToolCallDelta& out, bool at_end);
  void fall_back(ToolCallDelta& out);  // malformed: raw text and the rest become content

  IdGenerator make_id_;
  State state_ = State::kContent;
  std::string pending_;  // received, not yet consumed
  std::string raw_;      // consumed text of the block not yet emitted as calls (for fall_back)
  int n_calls_ = 0;
};

// The whole output at once.
ToolCallDelta parse_tool_calls(std::string_view text,
                               ToolCallParser::IdGenerator make_id = random_tool_call_id);

}  // namespace deepinfer::chat
