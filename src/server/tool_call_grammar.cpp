#include "server/tool_call_grammar.h"

#include <algorithm>
#include <vector>

#include "chat/deepseek_v3_markup.h"
#include "grammar/grammar_builder.h"
#include "grammar/json_schema_compiler.h"
#include "grammar/text_until.h"

namespace deepinfer {

using grammar::Expr;
using json = nlohmann::ordered_json;

namespace {

const json* find(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

bool strict_of(const json& tool) {
  const json* f = find(tool, "function");
  const json* strict = f ? find(*f, "strict") : nullptr;
  return strict && strict->is_boolean() && strict->get<bool>();
}

// A name chat::ToolCallParser reads back: no whitespace, '<' or '>'.
bool parsable_name(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '<' || c == '>') return false;
  }
  return true;
}

Status field_error(const std::string& field, const std::string& message) {
  return Status::Error("'" + field + "': " + message).with_field("tools");
}

// A strict tool's parameters as an object schema; absent: no parameters.
Result<json> object_schema(const json* parameters, const std::string& field) {
  if (!parameters) return json::parse(R"({"type": "object", "properties": {}, "additionalProperties": false})");
  if (!parameters->is_object()) return field_error(field, "must be a JSON Schema object");
  json schema = *parameters;
  const json* type = find(schema, "type");
  if (!type) {
    schema["type"] = "object";
  } else if (type->is_array()) {
    bool object = false;
    for (const json& t : *type) object |= t == "object";
    if (!object) return field_error(field, "must describe a JSON object ('type' has no \"object\")");
    schema["type"] = "object";
  } else if (*type != "object") {
    return field_error(field, "must describe a JSON object ('type' is not \"object\")");
  }
  return schema;
}

}  // namespace

bool has_strict_tools(const json& tools) {
  if (!tools.is_array()) return false;
  for (const json& t : tools) {
    if (strict_of(t)) return true;
  }
  return false;
}

Result<std::string> tool_call_constraint_text(ToolCallFormat format, const std::string& tool_choice,
                                              const std::string& function, const json& tools) {
  if (format != ToolCallFormat::kDeepseekV3 && format != ToolCallFormat::kDeepseekV31)
    return Status::Error("strict tool arguments are not supported with this model's tool-call format").with_field("tools");
  json out = json::object();
  out["format"] = format == ToolCallFormat::kDeepseekV3 ? "deepseek-v3" : "deepseek-v3.1";
  out["tool_choice"] = tool_choice;
  out["function"] = function;
  out["tools"] = json::array();
  if (!tools.is_array()) return Status::Error("'tools' must be a list").with_field("tools");
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "].function";
    const json* f = find(tools[i], "function");
    const json* name_field = f ? find(*f, "name") : nullptr;
    if (!name_field || !name_field->is_string()) return field_error(at + ".name", "must be a string");
    const std::string name = name_field->get<std::string>();
    if (!parsable_name(name)) return field_error(at + ".name", "a tool name may not be empty or hold whitespace, '<' or '>'");
    for (const json& earlier : out["tools"])
      if (earlier["name"] == name) return field_error(at + ".name", "'" + name + "' names two tools");
    json tool = {{"index", i}, {"name", name}, {"strict", strict_of(tools[i])}};
    if (strict_of(tools[i])) {
      DI_ASSIGN_OR_RETURN(json schema, object_schema(find(*f, "parameters"), at + ".parameters"));
      tool["parameters"] = std::move(schema);
    }
    out["tools"].push_back(std::move(tool));
  }
  return out.dump();
}

Result<grammar::CompiledGrammar> compile_tool_call_grammar(std::string_view text, grammar::JsonSchemaOptions options) {
  const json spec = json::parse(text, nullptr, false);
  if (spec.is_discarded() || !find(spec, "tools") || !spec["tools"].is_array())
    return Status::Error("tool-call constraint: not a tool list");
  for (const char* key : {"format", "tool_choice", "function"})
    if (!find(spec, key) || !spec[key].is_string()) return Status::Error(std::string("tool-call constraint: no ") + key);
  for (const json& tool : spec["tools"]) {
    if (!find(tool, "name") || !tool["name"].is_string() || !find(tool, "index") || !tool["index"].is_number_unsigned() ||
        !find(tool, "strict") || !tool["strict"].is_boolean() || (tool["strict"].get<bool>() && !find(tool, "parameters")))
      return Status::Error("tool-call constraint: a tool needs name, index, strict and, when strict, parameters");
  }
  options.escape_less_than = true;
  // The server's parser reads numbers as doubles: exponents of two digits keep every number finite.
  options.max_exponent_digits = std::min<uint32_t>(options.max_exponent_digits, 2);
  const bool v3 = spec["format"] == "deepseek-v3";
  const std::string choice = spec["tool_choice"].get<std::string>(), function = spec["function"].get<std::string>();
  const std::string calls_begin(chat::dsv3::kCallsBegin), calls_end(chat::dsv3::kCallsEnd);
  const std::string call_begin(chat::dsv3::kCallBegin), call_end(chat::dsv3::kCallEnd), sep(chat::dsv3::kSep);

  grammar::GrammarBuilder b(options.limits);
  const uint32_t call = b.declare("call"), more = b.declare("more");
  std::vector<Expr> calls, after_names;  // per tool: the whole call, and the call from after its name
  uint32_t function_args = 0;
  for (const json& tool : spec["tools"]) {
    const std::string name = tool["name"].get<std::string>();
    if (choice == "function" && name != function) continue;
    const std::string prefix = "tools[" + std::to_string(tool["index"].get<uint64_t>()) + "]";
    grammar::Grammar args;
    if (tool["strict"].get<bool>()) {
      auto compiled = grammar::compile_json_schema(tool["parameters"], options);
      if (!compiled.ok())
        return field_error(prefix + ".function.parameters", compiled.status().message());
      args = std::move(compiled).value();
    } else {
      args = grammar::any_json_object_grammar(options);
    }
    DI_ASSIGN_OR_RETURN(const uint32_t args_rule, b.import(args, prefix + ":"));
    function_args = args_rule;
    const uint32_t after = b.declare(prefix + "/call");
    DI_RETURN_IF_ERROR(b.define(after, v3 ? Expr::Seq({Expr::Literal("\n```json\n"), Expr::Ref(args_rule),
                                                       Expr::Literal("\n```" + call_end)})
                                          : Expr::Seq({Expr::Literal(sep), Expr::Ref(args_rule), Expr::Literal(call_end)})));
    after_names.push_back(Expr::Seq({Expr::Literal(name), Expr::Ref(after)}));
    calls.push_back(v3 ? Expr::Seq({Expr::Literal("function" + sep + name), Expr::Ref(after)}) : after_names.back());
  }
  if (calls.empty()) return Status::Error("tool-call constraint: no tool to call").with_field("tool_choice");
  DI_RETURN_IF_ERROR(b.define(call, Expr::Alt(calls)));
  DI_RETURN_IF_ERROR(b.define(more, Expr::Alt({Expr::Seq({Expr::Literal((v3 ? "\n" : "") + call_begin), Expr::Ref(call),
                                                          Expr::Ref(more)}),
                                               Expr::Literal(calls_end)})));
  uint32_t root = 0;
  if (choice == "auto") {
    const uint32_t block = b.declare("calls");
    DI_RETURN_IF_ERROR(b.define(block, Expr::Seq({Expr::Literal(call_begin), Expr::Ref(call), Expr::Ref(more)})));
    DI_ASSIGN_OR_RETURN(root, grammar::define_text_until(b, "root", calls_begin, /*may_end=*/true, block));
  } else if (choice == "required") {
    root = b.declare("root");
    if (v3) {
      DI_RETURN_IF_ERROR(b.define(root, Expr::Seq({Expr::Alt(after_names), Expr::Ref(more)})));
    } else {
      DI_RETURN_IF_ERROR(b.define(root, Expr::Seq({Expr::Ref(call), Expr::Ref(more)})));
    }
  } else if (choice == "function") {
    root = b.declare("root");
    DI_RETURN_IF_ERROR(b.define(root, Expr::Seq({Expr::Ref(function_args),
                                                 Expr::Literal(v3 ? "\n```" + call_end : call_end), Expr::Ref(more)})));
  } else {
    return Status::Error("tool-call constraint: tool_choice '" + choice + "'").with_field("tool_choice");
  }
  DI_ASSIGN_OR_RETURN(grammar::Grammar g, b.build(root));
  return grammar::CompiledGrammar::FromBuilt(std::move(g));
}

}  // namespace deepinfer
