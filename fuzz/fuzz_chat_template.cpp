// libFuzzer target for the chat module: the input up to its first NUL byte is rendered as a chat template
// (with a fixed conversation, tools and kwargs), and the whole input is fed, in pieces whose sizes
// come from the input, to the reasoning and tool-call parsers. Checks: no crash, no hang beyond
// the fuzzer's limits, and the parsers' streaming contract (the same result however the text is
// split, nothing dropped).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "chat/chat_template.h"
#include "chat/reasoning_parser.h"
#include "chat/tool_call_parser.h"

namespace {

using deepinfer::chat::ChatTemplate;
using ojson = nlohmann::ordered_json;

void check(bool ok) {
  if (!ok) std::abort();
}

void fuzz_template(std::string_view source) {
  ojson config = {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"chat_template", std::string(source)}};
  auto tmpl = ChatTemplate::FromConfig(config);
  if (!tmpl.ok()) return;
  static const ojson messages = ojson::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi <think>"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call00000", "type": "function",
      "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
    {"role": "tool", "content": "42"},
    {"role": "assistant", "content": "Done."}])");
  static const ojson tools = ojson::parse(R"([{"type": "function", "function": {"name": "f",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}])");
  (void)tmpl->render(messages, tools, true, ojson{{"thinking", true}});
  (void)tmpl->render(messages, nullptr, false, ojson::object());
}

void fuzz_parsers(std::string_view text, const uint8_t* cuts, size_t n_cuts) {
  auto ids = [] { return std::string("id"); };
  const auto whole_tools = deepinfer::chat::parse_tool_calls(text, ids);
  const auto whole_reasoning = deepinfer::chat::split_reasoning(text, true);
  deepinfer::chat::ToolCallParser tools(ids);
  deepinfer::chat::ReasoningParser reasoning(true);
  std::string content, reasoning_text, reasoning_content, arguments;
  size_t n_calls = 0, pos = 0, i = 0;
  auto take = [&](deepinfer::chat::ToolCallDelta d) {
    content += d.content;
    n_calls += d.tool_calls.size();
    for (const auto& c : d.tool_calls) arguments += c.arguments;
  };
  auto take_r = [&](deepinfer::chat::ReasoningDelta d) {
    reasoning_text += d.reasoning;
    reasoning_content += d.content;
  };
  while (pos < text.size()) {
    const size_t len = n_cuts ? 1 + cuts[i++ % n_cuts] % 16 : text.size();
    const std::string_view piece = text.substr(pos, len);
    take(tools.feed(piece));
    take_r(reasoning.feed(piece));
    pos += piece.size();
  }
  take(tools.finish());
  take_r(reasoning.finish());
  check(content == whole_tools.content);
  check(n_calls == whole_tools.tool_calls.size());
  std::string whole_arguments;
  for (const auto& c : whole_tools.tool_calls) whole_arguments += c.arguments;
  check(arguments == whole_arguments);
  check(reasoning_text == whole_reasoning.reasoning);
  check(reasoning_content == whole_reasoning.content);
  if (whole_tools.tool_calls.empty()) check(content == text);  // nothing dropped
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  fuzz_template(input.substr(0, input.find('\0')));
  const size_t n_cuts = std::min<size_t>(size, 8);
  fuzz_parsers(input, data, n_cuts);
  return 0;
}
