#include "chat/deepseek_v4_output_parser.h"

#include <algorithm>
#include <array>

#include <nlohmann/json.hpp>

#include "chat/deepseek_v4_markup.h"
#include "chat/marker.h"
#include "chat/py_json.h"

namespace deepinfer::chat {
namespace {

using namespace dsv4;

// The earliest occurrence in `text` of any of `markers`: its position and index, or npos.
struct Found {
  size_t pos = std::string::npos;
  size_t which = 0;
};
template <size_t N>
Found find_first(std::string_view text, const std::array<std::string_view, N>& markers) {
  Found f;
  for (size_t i = 0; i < N; ++i) {
    const size_t p = text.find(markers[i]);
    if (p < f.pos) f = {p, i};
  }
  return f;
}

// After a tag, DeepSeek's parser wants exactly ">\n" and then one of two tags.
enum class Separated { kFirst, kSecond, kNeedMore, kBad };
Separated separated(std::string_view rest, std::string_view first, std::string_view second, size_t& length) {
  for (const std::string_view tag : {first, second}) {
    const std::string expected = ">\n" + std::string(tag);
    if (rest.starts_with(expected)) {
      length = expected.size();
      return tag == first ? Separated::kFirst : Separated::kSecond;
    }
  }
  for (const std::string_view tag : {first, second}) {
    if ((">\n" + std::string(tag)).starts_with(rest)) return Separated::kNeedMore;
  }
  return Separated::kBad;
}

// `text` without a final `suffix`, where Python's `suffix$` matches: at the end, or before a
// final newline. False when it matches neither way.
bool strip_dollar_suffix(std::string_view& text, std::string_view suffix) {
  if (text.ends_with(suffix)) {
    text.remove_suffix(suffix.size());
    return true;
  }
  if (text.ends_with(std::string(suffix) + "\n")) {
    text.remove_suffix(suffix.size() + 1);
    return true;
  }
  return false;
}

// The invoke's head, matched as re `^\s*name="(.*?)">\n$`: the tool name, or false.
bool parse_invoke_name(std::string_view head, std::string& name) {
  while (!head.empty() && (head[0] == ' ' || head[0] == '\t' || head[0] == '\n' || head[0] == '\r')) {
    head.remove_prefix(1);
  }
  if (!head.starts_with("name=\"")) return false;
  head.remove_prefix(6);
  // The lazy group takes the shortest name, so a final ">\n\n" leaves one "\n" to `$`.
  if (head.ends_with("\">\n\n")) {
    head.remove_suffix(4);
  } else if (!strip_dollar_suffix(head, "\">\n")) {
    return false;
  }
  name = head;
  return true;
}

// A parameter, matched as re `^ name="(.*?)" string="(true|false)">(.*?)<$`.
bool parse_parameter(std::string_view text, std::string& key, bool& is_string, std::string& value) {
  if (!text.starts_with(" name=\"")) return false;
  text.remove_prefix(7);
  constexpr std::array<std::string_view, 2> kKinds = {"\" string=\"true\">", "\" string=\"false\">"};
  const Found f = find_first(text, kKinds);
  if (f.pos == std::string::npos) return false;
  key = text.substr(0, f.pos);
  is_string = f.which == 0;
  std::string_view rest = text.substr(f.pos + kKinds[f.which].size());
  if (rest.ends_with("<\n")) {
    rest.remove_suffix(2);
  } else if (rest.ends_with("<")) {
    rest.remove_suffix(1);
  } else {
    return false;
  }
  value = rest;
  return true;
}

}  // namespace

DeepseekV4OutputParser::DeepseekV4OutputParser(bool thinking, bool parse_tool_calls,
                                               ToolCallParser::IdGenerator make_id)
    : make_id_(std::move(make_id)),
      parse_tool_calls_(parse_tool_calls),
      state_(thinking ? State::kReasoning : State::kContent) {}

DeepseekV4Delta DeepseekV4OutputParser::feed(std::string_view text) {
  pending_.append(text);
  DeepseekV4Delta out;
  run(out, /*at_end=*/false);
  return out;
}

DeepseekV4Delta DeepseekV4OutputParser::finish() {
  DeepseekV4Delta out;
  run(out, /*at_end=*/true);
  for (const std::string_view token : kReservedInText) {
    if (all_content_.find(token) != std::string::npos) fail("'" + std::string(token) + "' in the content");
    if (all_reasoning_.find(token) != std::string::npos) fail("'" + std::string(token) + "' in the reasoning");
  }
  return out;
}

void DeepseekV4OutputParser::fail(const std::string& why) {
  if (error_.empty()) error_ = why;
}

void DeepseekV4OutputParser::emit_content(DeepseekV4Delta& out, std::string_view text) {
  out.content.append(text);
  all_content_.append(text);
}

void DeepseekV4OutputParser::emit_reasoning(DeepseekV4Delta& out, std::string_view text) {
  out.reasoning.append(text);
  all_reasoning_.append(text);
}

void DeepseekV4OutputParser::run(DeepseekV4Delta& out, bool at_end) {
  for (;;) {
    switch (state_) {
      case State::kReasoning: {
        const size_t p = pending_.find(kThinkEnd);
        if (p != std::string::npos) {
          emit_reasoning(out, std::string_view(pending_).substr(0, p));
          pending_.erase(0, p + kThinkEnd.size());
          state_ = State::kContent;
          continue;
        }
        const size_t hold = at_end ? 0 : partial_marker_suffix(pending_, kThinkEnd);
        emit_reasoning(out, std::string_view(pending_).substr(0, pending_.size() - hold));
        pending_.erase(0, pending_.size() - hold);
        if (at_end) fail("missing </think>");
        return;
      }
      case State::kContent: {
        const std::array<std::string_view, 2> markers = {kEos, parse_tool_calls_ ? kToolCallsStart : kEos};
        const Found f = find_first(pending_, markers);
        if (f.pos != std::string::npos) {
          emit_content(out, std::string_view(pending_).substr(0, f.pos));
          pending_.erase(0, f.pos + markers[f.which].size());
          if (f.which == 0) {
            state_ = State::kDone;
          } else {
            state_ = State::kBlock;
            block_.clear();
            pos_ = call_start_ = 0;
            step_ = BlockStep::kSeparator;
          }
          continue;
        }
        const size_t hold =
            at_end ? 0 : std::max(partial_marker_suffix(pending_, markers[0]), partial_marker_suffix(pending_, markers[1]));
        emit_content(out, std::string_view(pending_).substr(0, pending_.size() - hold));
        pending_.erase(0, pending_.size() - hold);
        if (at_end) fail("missing end of sentence");
        return;
      }
      case State::kBlock:
        block_ += pending_;
        pending_.clear();
        while (step_block(out, at_end)) {
        }
        if (state_ == State::kBlock) return;
        continue;
      case State::kAfterBlock:
        if (pending_.starts_with(kEos)) {
          pending_.erase(0, kEos.size());
          state_ = State::kDone;
          continue;
        }
        if (kEos.starts_with(pending_) && !at_end) return;
        if (kEos.starts_with(pending_)) {
          fail("missing end of sentence");
        } else {
          fail("text after the tool calls");
        }
        parse_tool_calls_ = false;
        state_ = State::kContent;
        continue;
      case State::kDone:
        if (pending_.empty()) return;
        fail("text after the end of sentence");
        state_ = State::kPassthrough;
        continue;
      case State::kPassthrough:
        emit_content(out, pending_);
        pending_.clear();
        return;
    }
  }
}

bool DeepseekV4OutputParser::step_block(DeepseekV4Delta& out, bool at_end) {
  const std::string_view rest = std::string_view(block_).substr(pos_);
  size_t length = 0;
  switch (step_) {
    case BlockStep::kSeparator:
    case BlockStep::kAfterParameter: {
      const bool between_calls = step_ == BlockStep::kSeparator;
      const std::string_view first = between_calls ? kInvokeOpen : kParameterOpen;
      const std::string_view second = between_calls ? kToolCallsClose : kInvokeClose;
      switch (separated(rest, first, second, length)) {
        case Separated::kNeedMore:
          if (at_end) fall_back(out, "the block is cut off");
          return false;
        case Separated::kBad:
          fall_back(out, "expected \">\\n\" and a tag");
          return false;
        case Separated::kFirst:
          pos_ += length;
          if (between_calls) call_args_.clear();
          step_ = between_calls ? BlockStep::kInvokeName : BlockStep::kParameter;
          return true;
        case Separated::kSecond:
          pos_ += length;
          if (!between_calls) break;  // the invoke closed: emit it below
          pending_ = block_.substr(pos_);
          block_.clear();
          state_ = State::kAfterBlock;
          return false;
      }
      break;
    }
    case BlockStep::kInvokeName: {
      const std::array<std::string_view, 2> stops = {kParameterOpen, kInvokeClose};
      const Found f = find_first(rest, stops);
      if (f.pos == std::string::npos) {
        if (at_end) fall_back(out, "the block is cut off");
        return false;
      }
      if (!parse_invoke_name(rest.substr(0, f.pos), call_name_)) {
        fall_back(out, "bad invoke name");
        return false;
      }
      pos_ += f.pos + stops[f.which].size();
      if (f.which == 0) {
        step_ = BlockStep::kParameter;
        return true;
      }
      break;  // an invoke without parameters closed: emit it below
    }
    case BlockStep::kParameter: {
      const size_t p = rest.find(kParameterClose);
      if (p == std::string::npos) {
        if (at_end) fall_back(out, "the block is cut off");
        return false;
      }
      std::string key, value;
      bool is_string = false;
      if (!parse_parameter(rest.substr(0, p), key, is_string, value)) {
        fall_back(out, "bad parameter");
        return false;
      }
      for (const auto& [k, v] : call_args_) {
        if (k == key) {
          fall_back(out, "duplicate parameter '" + key + "'");
          return false;
        }
      }
      if (!is_string && !nlohmann::json::accept(value)) {
        fall_back(out, "parameter '" + key + "' is not JSON");
        return false;
      }
      call_args_.emplace_back(std::move(key), is_string ? python_json_dumps(value) : std::move(value));
      pos_ += p + kParameterClose.size();
      step_ = BlockStep::kAfterParameter;
      return true;
    }
  }
  // An invoke closed at pos_ (just after "</｜DSML｜invoke"): the whole call goes out.
  ToolCall call;
  call.index = n_calls_++;
  call.id = make_id_();
  call.type = "function";
  call.name = call_name_;
  call.arguments = "{";
  for (size_t i = 0; i < call_args_.size(); ++i) {
    if (i) call.arguments += ", ";
    call.arguments += python_json_dumps(call_args_[i].first) + ": " + call_args_[i].second;
  }
  call.arguments += "}";
  out.tool_calls.push_back(std::move(call));
  call_start_ = pos_;
  step_ = BlockStep::kSeparator;
  return true;
}

void DeepseekV4OutputParser::fall_back(DeepseekV4Delta& out, const std::string& why) {
  fail("malformed tool call: " + why);
  if (n_calls_ == 0) emit_content(out, kToolCallsStart);
  pending_ = block_.substr(call_start_);  // read again as content
  block_.clear();
  parse_tool_calls_ = false;  // the rest is content, up to the end of sentence
  state_ = State::kContent;
}

Result<DeepseekV4Message> parse_deepseek_v4_completion(std::string_view text, bool thinking,
                                                       ToolCallParser::IdGenerator make_id) {
  DeepseekV4OutputParser parser(thinking, /*parse_tool_calls=*/true, std::move(make_id));
  DeepseekV4Message message;
  for (DeepseekV4Delta d : {parser.feed(text), parser.finish()}) {
    message.reasoning += d.reasoning;
    message.content += d.content;
    for (ToolCall& c : d.tool_calls) message.tool_calls.push_back(std::move(c));
  }
  if (!parser.error().empty()) return Status::Error("not a well-formed DeepSeek-V4 completion: " + parser.error());
  return message;
}

}  // namespace deepinfer::chat
