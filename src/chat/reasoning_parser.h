// ReasoningParser: splits generated text into reasoning (inside <think> ... </think>, DeepSeek R1 /
// V3.1 style) and content, as the text streams in.
//
// Contract:
// - When the prompt left a <think> block open (R1's template and V3.1's thinking mode end the
//   prompt with "<think>"; see prompt_opens_reasoning), the output starts as reasoning.
//   Otherwise output that begins with "<think>" (after optional whitespace) opens reasoning, and
//   any other output is all content.
// - A leading "<think>" in the output is dropped even when the prompt opened one (models repeat it).
// - "</think>" ends reasoning; whitespace right after it is dropped (models put "\n\n" there);
//   everything after is content, verbatim, including any later "<think>".
// - Output that ends before "</think>" (e.g. at max_tokens) is all reasoning.
// - Markers split across deltas are recognized: text that may be the start of a marker is held
//   back until the next delta (or finish) decides it. Nothing else is held.
// Feeding a text in any split, then calling finish(), gives the same concatenated reasoning and
// content as split_reasoning() on the whole text. Not thread-safe: one parser per request.
#pragma once

#include <string>
#include <string_view>

namespace deepinfer::chat {

struct ReasoningDelta {
  std::string reasoning;
  std::string content;
};

class ReasoningParser {
 public:
  explicit ReasoningParser(bool prompt_opened_reasoning);

  ReasoningDelta feed(std::string_view text);
  // The end of the output: releases held-back text.
  ReasoningDelta finish();

  bool in_reasoning() const { return state_ == State::kReasoning || (state_ == State::kStart && opened_); }

 private:
  enum class State { kStart, kReasoning, kAfterEnd, kContent };
  void run(ReasoningDelta& out, bool at_end);

  State state_ = State::kStart;
  bool opened_;          // the prompt opened <think>
  std::string pending_;  // received, not yet emitted
};

// Whether a rendered prompt leaves a reasoning block open: its last "<think>" comes after its last
// "</think>".
bool prompt_opens_reasoning(std::string_view prompt);

// The whole output at once.
ReasoningDelta split_reasoning(std::string_view text, bool prompt_opened_reasoning);

}  // namespace deepinfer::chat
