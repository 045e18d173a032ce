#include "chat/reasoning_parser.h"

#include "chat/marker.h"

namespace deepinfer::chat {
namespace {

constexpr std::string_view kThinkStart = "<think>";
constexpr std::string_view kThinkEnd = "</think>";

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

ReasoningParser::ReasoningParser(bool prompt_opened_reasoning) : opened_(prompt_opened_reasoning) {}

ReasoningDelta ReasoningParser::feed(std::string_view text) {
  pending_.append(text);
  ReasoningDelta out;
  run(out, false);
  return out;
}

ReasoningDelta ReasoningParser::finish() {
  ReasoningDelta out;
  run(out, true);
  return out;
}

void ReasoningParser::run(ReasoningDelta& out, bool at_end) {
  while (true) {
    switch (state_) {
      case State::kStart: {
        size_t i = 0;
        while (i < pending_.size() && is_ws(pending_[i])) ++i;
        const std::string_view rest = std::string_view(pending_).substr(i);
        if (rest.substr(0, kThinkStart.size()) == kThinkStart) {
          pending_.erase(0, i + kThinkStart.size());
          state_ = State::kReasoning;
          continue;
        }
        if (!at_end && kThinkStart.substr(0, rest.size()) == rest) return;  // may still become "<think>"
        state_ = opened_ ? State::kReasoning : State::kContent;
        continue;
      }
      case State::kReasoning: {
        const size_t end = pending_.find(kThinkEnd);
        if (end != std::string::npos) {
          out.reasoning.append(pending_, 0, end);
          pending_.erase(0, end + kThinkEnd.size());
          state_ = State::kAfterEnd;
          continue;
        }
        const size_t keep = at_end ? 0 : partial_marker_suffix(pending_, kThinkEnd);
        out.reasoning.append(pending_, 0, pending_.size() - keep);
        pending_.erase(0, pending_.size() - keep);
        return;
      }
      case State::kAfterEnd: {
        size_t i = 0;
        while (i < pending_.size() && is_ws(pending_[i])) ++i;
        pending_.erase(0, i);
        if (pending_.empty()) return;
        state_ = State::kContent;
        continue;
      }
      case State::kContent:
        out.content.append(pending_);
        pending_.clear();
        return;
    }
  }
}

bool prompt_opens_reasoning(std::string_view prompt) {
  const size_t start = prompt.rfind(kThinkStart);
  if (start == std::string_view::npos) return false;
  const size_t end = prompt.rfind(kThinkEnd);
  return end == std::string_view::npos || end < start;
}

ReasoningDelta split_reasoning(std::string_view text, bool prompt_opened_reasoning) {
  ReasoningParser parser(prompt_opened_reasoning);
  ReasoningDelta all = parser.feed(text);
  ReasoningDelta tail = parser.finish();
  all.reasoning += tail.reasoning;
  all.content += tail.content;
  return all;
}

}  // namespace deepinfer::chat
