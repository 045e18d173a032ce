// The strings of DeepSeek-V4's prompt format (DeepSeek's encoding_dsv4.py): special tokens, task
// tokens and the DSML tool-call markup, shared by the encoder and the output parser. Each special
// string is one token of the V4 tokenizer; DSML tags are several.
#pragma once

#include <string_view>

namespace deepinfer::chat::dsv4 {

inline constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kUser = "<｜User｜>";
inline constexpr std::string_view kAssistant = "<｜Assistant｜>";
inline constexpr std::string_view kLatestReminder = "<｜latest_reminder｜>";
inline constexpr std::string_view kThinkStart = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";
inline constexpr std::string_view kDsml = "｜DSML｜";

// DSML tags. A tool-calls block in an answer:
//   \n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="NAME">\n
//   <｜DSML｜parameter name="KEY" string="true|false">VALUE</｜DSML｜parameter>\n ... </｜DSML｜invoke>\n
//   ... more invokes ... </｜DSML｜tool_calls>
inline constexpr std::string_view kToolCallsStart = "\n\n<｜DSML｜tool_calls";  // as the parser finds it
inline constexpr std::string_view kToolCallsClose = "</｜DSML｜tool_calls>";
inline constexpr std::string_view kInvokeOpen = "<｜DSML｜invoke";
inline constexpr std::string_view kInvokeClose = "</｜DSML｜invoke";  // then ">"
inline constexpr std::string_view kParameterOpen = "<｜DSML｜parameter";
inline constexpr std::string_view kParameterClose = "/｜DSML｜parameter";  // after "<", then ">"

// Special strings that never belong in parsed content or reasoning.
inline constexpr std::string_view kReservedInText[] = {kBos, kEos, kThinkStart, kThinkEnd, kDsml};

}  // namespace deepinfer::chat::dsv4
