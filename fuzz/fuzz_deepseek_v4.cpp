// libFuzzer target for DeepSeek-V4 chat: the input's first byte picks the parser's modes (thinking,
// tool calls); the rest is a completion fed to DeepseekV4OutputParser whole and in pieces whose
// sizes come from the input, and, when it is JSON, a conversation given to encode_deepseek_v4.
// Checks: no crash, no hang beyond the fuzzer's limits, the streaming contract (the same
// reasoning, content, calls and verdict however the text is split), and, for valid UTF-8 text
// (what the detokenizer gives), every call's arguments a JSON object.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/deepseek_v4_encoder.h"
#include "chat/deepseek_v4_output_parser.h"

namespace {

using namespace deepinfer::chat;

void check(bool ok) {
  if (!ok) std::abort();
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
    }
    i += n;
  }
  return true;
}

struct Outcome {
  std::string reasoning, content, calls, error;
};

Outcome parse(std::string_view text, bool thinking, bool tools, const uint8_t* cuts, size_t n_cuts) {
  DeepseekV4OutputParser parser(thinking, tools, [] { return std::string("id"); });
  const bool utf8 = valid_utf8(text);
  Outcome o;
  auto take = [&](const DeepseekV4Delta& d) {
    o.reasoning += d.reasoning;
    o.content += d.content;
    for (const ToolCall& c : d.tool_calls) {
      const auto args = nlohmann::json::parse(c.arguments, nullptr, /*allow_exceptions=*/false);
      check(args.is_object() || !utf8);
      o.calls += c.name + '\0' + c.arguments + '\0';
    }
  };
  size_t pos = 0, i = 0;
  while (pos < text.size()) {
    const size_t len = n_cuts ? 1 + cuts[i++ % n_cuts] % 16 : text.size();
    const std::string_view piece = text.substr(pos, len);
    take(parser.feed(piece));
    pos += piece.size();
  }
  take(parser.finish());
  o.error = parser.error();
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool thinking = data[0] & 1, tools = data[0] & 2;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const Outcome whole = parse(text, thinking, tools, nullptr, 0);
  const Outcome pieces = parse(text, thinking, tools, data, std::min<size_t>(size, 8));
  check(whole.reasoning == pieces.reasoning && whole.content == pieces.content && whole.calls == pieces.calls);
  check(whole.error.empty() == pieces.error.empty());
  check(whole.reasoning.size() + whole.content.size() <= text.size());

  const auto conversation = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!conversation.is_discarded()) {
    DeepseekV4Options options;
    options.thinking_mode = thinking ? ThinkingMode::kThinking : ThinkingMode::kChat;
    options.drop_thinking = !tools;
    (void)encode_deepseek_v4(conversation, nullptr, options);
  }
  return 0;
}
