#include "server/tool_choice.h"

#include "chat/deepseek_v3_markup.h"

namespace deepinfer {
namespace {

const std::string kCallsBegin(chat::dsv3::kCallsBegin);
const std::string kCallBegin(chat::dsv3::kCallBegin);
const std::string kSep(chat::dsv3::kSep);

}  // namespace

ToolCallFormat detect_tool_call_format(const chat::ChatTemplate& tmpl) {
  const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(R"([
    {"role": "user", "content": "x"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_0", "type": "function", "function": {"name": "probe_fn", "arguments": "{}"}}]}])");
  auto rendered = tmpl.render(messages, nullptr, false, nlohmann::ordered_json::object());
  if (!rendered.ok()) return ToolCallFormat::kUnknown;
  const std::string& text = rendered.value();
  if (text.find(kCallBegin + "function" + kSep + "probe_fn") != std::string::npos) return ToolCallFormat::kDeepseekV3;
  if (text.find(kCallBegin + "probe_fn" + kSep) != std::string::npos) return ToolCallFormat::kDeepseekV31;
  return ToolCallFormat::kUnknown;
}

std::string forced_tool_call_prefix(ToolCallFormat format, const std::string& tool_choice, const std::string& function) {
  if ((tool_choice != "required" && tool_choice != "function") || format == ToolCallFormat::kUnknown ||
      format == ToolCallFormat::kDeepseekV4)
    return "";
  std::string prefix = kCallsBegin + kCallBegin;
  if (format == ToolCallFormat::kDeepseekV3) {
    prefix += "function" + kSep;
    if (tool_choice == "function") prefix += function + "\n```json\n";
  } else if (tool_choice == "function") {
    prefix += function + kSep;
  }
  return prefix;
}

}  // namespace deepinfer
