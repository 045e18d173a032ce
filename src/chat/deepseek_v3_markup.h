// The tool-call markers of DeepSeek-V3/R1/V3.1 chat templates, shared by the tool-call parser,
// the forced tool-call prefixes and the strict tool-call grammar. Each is one added token of the
// DeepSeek-V3 tokenizer (not a special token: it decodes to this text).
#pragma once

#include <string_view>

namespace deepinfer::chat::dsv3 {

inline constexpr std::string_view kCallsBegin = "<｜tool▁calls▁begin｜>";
inline constexpr std::string_view kCallsEnd = "<｜tool▁calls▁end｜>";
inline constexpr std::string_view kCallBegin = "<｜tool▁call▁begin｜>";
inline constexpr std::string_view kCallEnd = "<｜tool▁call▁end｜>";
inline constexpr std::string_view kSep = "<｜tool▁sep｜>";

}  // namespace deepinfer::chat::dsv3
