#include "chat/tool_call_parser.h"

#include <optional>
#include <random>

#include <nlohmann/json.hpp>

#include "chat/deepseek_v3_markup.h"
#include "chat/marker.h"

namespace deepinfer::chat {
namespace {

using dsv3::kCallBegin;
using dsv3::kCallEnd;
using dsv3::kCallsBegin;
using dsv3::kCallsEnd;
using dsv3::kSep;

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ws(s.back())) s.remove_suffix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// A name as the model writes it: no whitespace, no marker characters.
bool valid_name(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (is_ws(c) || c == '<' || c == '>') return false;
  }
  return true;
}

// The text between <｜tool▁call▁begin｜> and <｜tool▁call▁end｜>, as {name, arguments}.
std::optional<std::pair<std::string, std::string>> parse_call(std::string_view body) {
  const size_t sep = body.find(kSep);
  if (sep == std::string_view::npos) return std::nullopt;
  const std::string_view header = trim(body.substr(0, sep));
  std::string_view rest = body.substr(sep + kSep.size());
  std::string_view name, args;
  const std::string_view rest_trimmed = trim(rest);
  if (header == "function" && !rest_trimmed.empty() && rest_trimmed.front() != '{') {
    // V3: NAME\n```json\nARGS\n```
    const size_t nl = rest.find('\n');
    if (nl == std::string_view::npos) return std::nullopt;
    name = trim(rest.substr(0, nl));
    args = trim(rest.substr(nl + 1));
    if (starts_with(args, "```json")) {
      args.remove_prefix(7);
    } else if (starts_with(args, "```")) {
      args.remove_prefix(3);
    }
    args = trim(args);
    if (args.size() >= 3 && args.substr(args.size() - 3) == "```") args.remove_suffix(3);
    args = trim(args);
  } else {
    // V3.1: NAME<｜tool▁sep｜>ARGS
    name = header;
    args = rest_trimmed;
  }
  if (!valid_name(name)) return std::nullopt;
  const nlohmann::json parsed = nlohmann::json::parse(args, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) return std::nullopt;
  return std::make_pair(std::string(name), std::string(args));
}

}  // namespace

std::string random_tool_call_id() {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id.push_back(kAlphabet[pick(rng)]);
  return id;
}

ToolCallParser::ToolCallParser(IdGenerator make_id) : make_id_(std::move(make_id)) {}

ToolCallDelta ToolCallParser::feed(std::string_view text) {
  pending_.append(text);
  ToolCallDelta out;
  run(out, false);
  return out;
}

ToolCallDelta ToolCallParser::finish() {
  ToolCallDelta out;
  run(out, true);
  if (state_ == State::kBetweenCalls || state_ == State::kInCall) fall_back(out);
  return out;
}

void ToolCallParser::fall_back(ToolCallDelta& out) {
  out.content += raw_;
  out.content += pending_;
  raw_.clear();
  pending_.clear();
  state_ = State::kPassthrough;
}

void ToolCallParser::run(ToolCallDelta& out, bool at_end) {
  while (true) {
    switch (state_) {
      case State::kContent: {
        const size_t begin = pending_.find(kCallsBegin);
        if (begin != std::string::npos) {
          out.content.append(pending_, 0, begin);
          raw_.assign(kCallsBegin);
          pending_.erase(0, begin + kCallsBegin.size());
          state_ = State::kBetweenCalls;
          continue;
        }
        const size_t keep = at_end ? 0 : partial_marker_suffix(pending_, kCallsBegin);
        out.content.append(pending_, 0, pending_.size() - keep);
        pending_.erase(0, pending_.size() - keep);
        return;
      }
      case State::kBetweenCalls: {
        size_t i = 0;
        while (i < pending_.size() && is_ws(pending_[i])) ++i;
        const std::string_view rest = std::string_view(pending_).substr(i);
        if (starts_with(rest, kCallBegin)) {
          raw_.append(pending_, 0, i + kCallBegin.size());
          pending_.erase(0, i + kCallBegin.size());
          state_ = State::kInCall;
          continue;
        }
        if (starts_with(rest, kCallsEnd)) {
          if (!raw_.empty()) {  // a block without calls is not a tool call: keep it as text
            fall_back(out);
            continue;
          }
          pending_.erase(0, i + kCallsEnd.size());
          raw_.clear();
          state_ = State::kContent;
          continue;
        }
        const bool may_be_marker = starts_with(kCallBegin, rest) || starts_with(kCallsEnd, rest);
        if (!may_be_marker) {
          fall_back(out);
          continue;
        }
        return;  // only whitespace or part of a marker so far
      }
      case State::kInCall: {
        const size_t end = pending_.find(kCallEnd);
        if (end == std::string::npos) return;
        const std::string_view body = std::string_view(pending_).substr(0, end);
        auto call = parse_call(body);
        if (!call || body.find(kCallBegin) != std::string_view::npos) {
          fall_back(out);
          continue;
        }
        ToolCall tc;
        tc.index = n_calls_++;
        tc.id = make_id_();
        tc.type = "function";
        tc.name = std::move(call->first);
        tc.arguments = std::move(call->second);
        out.tool_calls.push_back(std::move(tc));
        pending_.erase(0, end + kCallEnd.size());
        raw_.clear();
        state_ = State::kBetweenCalls;
        continue;
      }
      case State::kPassthrough:
        out.content += pending_;
        pending_.clear();
        return;
    }
  }
}

ToolCallDelta parse_tool_calls(std::string_view text, ToolCallParser::IdGenerator make_id) {
  ToolCallParser parser(std::move(make_id));
  ToolCallDelta all = parser.feed(text);
  ToolCallDelta tail = parser.finish();
  all.content += tail.content;
  for (auto& c : tail.tool_calls) all.tool_calls.push_back(std::move(c));
  return all;
}

}  // namespace deepinfer::chat
