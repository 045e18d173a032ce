// libFuzzer target for strict tool calls (server/tool_call_grammar.h): the first byte picks the
// tool-call format (DeepSeek-V3, V3.1 or V4's DSML) and tool_choice, the rest is a request's
// `tools` array as JSON text (seed it with fuzz/corpus/tool_call_grammar). Tools of any shape, names and parameter schemas must give
// a constraint text and grammar or a failed Result naming the problem, never a crash or a hang;
// a compiled grammar runs through the automaton on the same bytes (grammar_fuzz_util.h checks).
//   build-fuzz/fuzz/fuzz_tool_call_grammar fuzz/corpus/tool_call_grammar -max_total_time=60
#include <cstdint>
#include <string>
#include <string_view>

#include "grammar_fuzz_util.h"
#include "server/tool_call_grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepinfer;
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto tools = nlohmann::ordered_json::parse(text, nullptr, false);
  if (tools.is_discarded()) return 0;
  const ToolCallFormat formats[] = {ToolCallFormat::kDeepseekV3, ToolCallFormat::kDeepseekV31, ToolCallFormat::kDeepseekV4};
  const ToolCallFormat format = formats[data[0] % 3];
  const char* choices[] = {"auto", "required", "function"};
  const std::string choice = choices[(data[0] / 3) % 3];
  std::string function;
  if (choice == "function" && tools.is_array() && !tools.empty() && tools[0].is_object() &&
      tools[0].contains("function") && tools[0]["function"].is_object() && tools[0]["function"].contains("name") &&
      tools[0]["function"]["name"].is_string())
    function = tools[0]["function"]["name"].get<std::string>();
  auto spec = tool_call_constraint_text(format, choice, function, tools);
  if (!spec.ok()) {
    DI_CHECK(!spec.status().message().empty());
    return 0;
  }
  grammar::JsonSchemaOptions options;
  options.limits = grammar::fuzz_limits();
  options.max_schema_depth = 16;
  auto g = compile_tool_call_grammar(spec.value(), options);
  if (g.ok()) {
    grammar::walk_checked(g.value(), text);
  } else {
    DI_CHECK(!g.status().message().empty());
  }
  return 0;
}
