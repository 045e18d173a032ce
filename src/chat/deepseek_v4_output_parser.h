// DeepseekV4OutputParser: splits a DeepSeek-V4 completion into reasoning, content and DSML tool
// calls as the text streams in, as DeepSeek's parse_message_from_completion_text
// (encoding_dsv4.py) splits the whole completion.
//
// Format (deepseek_v4_markup.h): in thinking mode the completion starts as reasoning, up to
// "</think>"; then content, up to "<｜end▁of▁sentence｜>" or a tool-calls block
// ("\n\n<｜DSML｜tool_calls>" ... "</｜DSML｜tool_calls>"), which must be followed by the end of
// sentence and nothing else. Each invoke becomes an OpenAI tool call whose arguments are the JSON
// object {"KEY": VALUE, ...} with ", " and ": " separators: a string="true" VALUE as a JSON
// string, a string="false" VALUE as the model wrote it (it must be JSON).
//
// Contract:
// - Markers split across deltas are recognized: only text that may be the start of a marker is
//   held back until the next delta (or finish) decides it.
// - A tool call is emitted whole, in one delta, once its invoke has closed and parsed; a
//   malformed call never reaches the client half emitted. Malformed markup (a tag out of place, a
//   duplicate parameter, a non-JSON string="false" value, a block cut off by the end) makes the
//   raw text from the start of the first call not yet emitted, and everything after it up to the
//   end of sentence, content. Nothing but the parsed markers (and the end of sentence) is dropped;
//   text after the end of sentence is content too.
// - error() is empty while the completion is one DeepSeek's parser accepts, else it says what it
//   rejects (missing </think>, missing end of sentence, malformed calls, text after the end,
//   special tokens in content or reasoning); it is complete after finish(). A truncated
//   completion (max_tokens) is an error in this sense and still yields its text.
// - Without parse_tool_calls, tool-calls markup is content (and an error, as DeepSeek's parser
//   would parse it).
// Feeding a text in any split, then calling finish(), gives the same concatenated reasoning,
// content, calls and error() as parse_deepseek_v4_completion() on the whole text.
// Not thread-safe: one parser per request.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/tool_call_parser.h"
#include "core/status.h"

namespace deepinfer::chat {

struct DeepseekV4Delta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> tool_calls;
};

class DeepseekV4OutputParser {
 public:
  // thinking: the prompt opened <think> (thinking mode), so the completion starts as reasoning.
  DeepseekV4OutputParser(bool thinking, bool parse_tool_calls,
                         ToolCallParser::IdGenerator make_id = random_tool_call_id);

  DeepseekV4Delta feed(std::string_view text);
  // The end of the completion: releases held-back text; an unfinished block becomes content.
  DeepseekV4Delta finish();

  const std::string& error() const { return error_; }

 private:
  enum class State { kReasoning, kContent, kBlock, kAfterBlock, kDone, kPassthrough };
  // Where the block parser is: after ">\n" comes an invoke or the block's end; inside an invoke,
  // its name, then parameters.
  enum class BlockStep { kSeparator, kInvokeName, kParameter, kAfterParameter };

  void run(DeepseekV4Delta& out, bool at_end);
  // Parses block_ from pos_; false when it needs more text (or failed and fell back).
  bool step_block(DeepseekV4Delta& out, bool at_end);
  void fall_back(DeepseekV4Delta& out, const std::string& why);
  void fail(const std::string& why);
  void emit_content(DeepseekV4Delta& out, std::string_view text);
  void emit_reasoning(DeepseekV4Delta& out, std::string_view text);

  ToolCallParser::IdGenerator make_id_;
  bool parse_tool_calls_;
  State state_;
  std::string pending_;  // received, not yet consumed (outside a block)
  std::string error_;

  // The block being parsed: its text after "\n\n<｜DSML｜tool_calls", the parse position, the
  // start of the invoke not yet emitted, and that invoke's name and parameters.
  std::string block_;
  size_t pos_ = 0;
  size_t call_start_ = 0;
  BlockStep step_ = BlockStep::kSeparator;
  std::string call_name_;
  std::vector<std::pair<std::string, std::string>> call_args_;  // key, JSON value text
  int n_calls_ = 0;

  // Everything emitted as content and reasoning, for the special-token check at finish.
  std::string all_content_;
  std::string all_reasoning_;
};

// The whole completion at once; fails with error() when DeepSeek's parser would reject it.
struct DeepseekV4Message {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> tool_calls;
};
Result<DeepseekV4Message> parse_deepseek_v4_completion(std::string_view text, bool thinking,
                                                       ToolCallParser::IdGenerator make_id = random_tool_call_id);

}  // namespace deepinfer::chat
