#include "server/tool_call_grammar.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "chat/deepseek_v3_markup.h"
#include "chat/deepseek_v4_markup.h"
#include "grammar/grammar_builder.h"
#include "grammar/json_schema_compiler.h"
#include "grammar/text_until.h"

namespace deepinfer {

using grammar::Expr;
using json = nlohmann::ordered_json;

namespace {

// U+FF5C, in every DSML tag ("<｜DSML｜...").
constexpr std::string_view kFullwidthBar = "\xEF\xBD\x9C";
constexpr char32_t kFullwidthBarCodePoint = 0xFF5C;

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

// A name chat::ToolCallParser reads back: no whitespace, '<' or '>'; in DSML also no '"' and no
// fullwidth bar (the character of every DSML tag), for DeepseekV4OutputParser.
bool parsable_name(const std::string& name, bool dsml) {
  if (name.empty()) return false;
  for (char c : name) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '<' || c == '>') return false;
    if (dsml && c == '"') return false;
  }
  return !dsml || name.find(kFullwidthBar) == std::string::npos;
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

// The answer's text when the constraint has a content schema: its JSON, imported into `b` (the
// rule's id), or nullopt without one. Strings write '<' (and `options`' escaped code points) as
// escapes, so the text can never hold a tool-call marker.
Result<std::optional<uint32_t>> content_rule(grammar::GrammarBuilder& b, const json& spec,
                                            grammar::JsonSchemaOptions options) {
  auto it = spec.find("content");
  if (it == spec.end()) return std::optional<uint32_t>();
  options.escape_less_than = true;
  auto compiled = grammar::compile_json_schema(*it, options);
  if (!compiled.ok())
    return Status::Error("'response_format.json_schema.schema': " + compiled.status().message())
        .with_field("response_format");
  DI_ASSIGN_OR_RETURN(const uint32_t rule, b.import(compiled.value(), "content:"));
  return std::optional<uint32_t>(rule);
}

// A non-strict tool's parameters in DSML, where each is written apart: its declared properties,
// in order, each optional and of any value.
json lenient_parameters(const json* parameters) {
  json out = {{"type", "object"}, {"properties", json::object()}, {"additionalProperties", false}};
  const json* properties = parameters ? find(*parameters, "properties") : nullptr;
  if (properties && properties->is_object())
    for (const auto& [key, value] : properties->items()) out["properties"][key] = true;
  return out;
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
                                              const std::string& function, const json& tools, const json& content) {
  if (format == ToolCallFormat::kUnknown)
    return Status::Error("strict tool arguments are not supported with this model's tool-call format").with_field("tools");
  const bool dsml = format == ToolCallFormat::kDeepseekV4;
  json out = json::object();
  out["format"] = dsml ? "deepseek-v4" : format == ToolCallFormat::kDeepseekV3 ? "deepseek-v3" : "deepseek-v3.1";
  out["tool_choice"] = tool_choice;
  out["function"] = function;
  if (!content.is_null()) out["content"] = content;
  out["tools"] = json::array();
  if (!tools.is_array()) return Status::Error("'tools' must be a list").with_field("tools");
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "].function";
    const json* f = find(tools[i], "function");
    const json* name_field = f ? find(*f, "name") : nullptr;
    if (!name_field || !name_field->is_string()) return field_error(at + ".name", "must be a string");
    const std::string name = name_field->get<std::string>();
    if (!parsable_name(name, dsml))
      return field_error(at + ".name", dsml ? "a tool name may not be empty or hold whitespace, '<', '>', '\"' or '｜'"
                                            : "a tool name may not be empty or hold whitespace, '<' or '>'");
    for (const json& earlier : out["tools"])
      if (earlier["name"] == name) return field_error(at + ".name", "'" + name + "' names two tools");
    json tool = {{"index", i}, {"name", name}, {"strict", strict_of(tools[i])}};
    if (strict_of(tools[i])) {
      DI_ASSIGN_OR_RETURN(json schema, object_schema(find(*f, "parameters"), at + ".parameters"));
      tool["parameters"] = std::move(schema);
    } else if (dsml) {
      tool["parameters"] = lenient_parameters(find(*f, "parameters"));
    }
    out["tools"].push_back(std::move(tool));
  }
  return out.dump();
}

namespace {

// DeepSeek-V4's DSML (chat/deepseek_v4_markup.h, as DeepSeek's encoder writes it):
//   auto:      TEXT | TEXT "\n\n<｜DSML｜tool_calls" BLOCK    (TEXT: no '｜', <think> or </think>)
//   required:  NAME_i "\">\n" PARAMS_i MORE                  (after "...<｜DSML｜invoke name=\"")
//   function:  PARAMS_f MORE_f                               (after "...name=\"NAME\">\n")
//   BLOCK    ::= ">\n" INVOKE MORE
//   INVOKE_i ::= "<｜DSML｜invoke name=\"" NAME_i "\">\n" PARAMS_i
//   PARAMS_i ::= P_a "\n" P_b ... "\n</｜DSML｜invoke>"      (declared order; optional ones may be left out)
//   P_k      ::= "<｜DSML｜parameter name=\"K\" string=\"true\">" RAW_k "</｜DSML｜parameter>"
//              | "<｜DSML｜parameter name=\"K\" string=\"false\">" JSON_k "</｜DSML｜parameter>"
//   MORE     ::= "\n" INVOKE MORE | "\n</｜DSML｜tool_calls>"
// With a content schema, auto is CONTENT | "\n\n<｜DSML｜tool_calls" BLOCK (CONTENT: its JSON).
// RAW_k: the raw text of the strings K's schema admits; JSON_k: its values as JSON, offered unless
// the schema admits only strings that RAW_k writes. The fullwidth bar of every tag is escaped in
// JSON strings (\uff5c) and left out of raw ones, so a value never holds a tag.
Result<grammar::CompiledGrammar> compile_dsml_grammar(const json& spec, const grammar::JsonSchemaOptions& options) {
  using namespace chat::dsv4;
  const std::string choice = spec["tool_choice"].get<std::string>(), function = spec["function"].get<std::string>();
  const std::string invoke_open = std::string(kInvokeOpen) + " name=\"";
  const std::string invoke_close = "\n" + std::string(kInvokeClose) + ">";
  const std::string parameter_open = std::string(kParameterOpen) + " name=\"";
  const std::string parameter_close = "<" + std::string(kParameterClose) + ">";

  grammar::GrammarBuilder b(options.limits);
  const uint32_t invoke = b.declare("invoke"), more = b.declare("more");
  std::vector<Expr> invokes, named;  // per tool: the whole invoke, and the invoke from its name on
  uint32_t function_params = 0;
  for (const json& tool : spec["tools"]) {
    const std::string name = tool["name"].get<std::string>();
    if (choice == "function" && name != function) continue;
    const std::string prefix = "tools[" + std::to_string(tool["index"].get<uint64_t>()) + "]";
    auto members = grammar::compile_object_members(tool["parameters"], options);
    if (!members.ok()) return field_error(prefix + ".function.parameters", members.status().message());
    std::vector<Expr> params;
    std::vector<bool> required;
    for (size_t k = 0; k < members->size(); ++k) {
      const grammar::ObjectMember& m = (*members)[k];
      if (m.name.find('"') != std::string::npos || m.name.find(kFullwidthBar) != std::string::npos)
        return field_error(prefix + ".function.parameters",
                           "property name '" + m.name + "' cannot be a DSML parameter name (it holds '\"' or '｜')");
      const std::string at = prefix + ":" + std::to_string(k);
      std::vector<Expr> forms;
      if (m.raw_string) {
        DI_ASSIGN_OR_RETURN(const uint32_t raw, b.import(*m.raw_string, at + "/raw:"));
        forms.push_back(Expr::Seq({Expr::Literal(parameter_open + m.name + "\" string=\"true\">"), Expr::Ref(raw),
                                   Expr::Literal(parameter_close)}));
      }
      if (m.json_value) {
        DI_ASSIGN_OR_RETURN(const uint32_t value, b.import(*m.json_value, at + "/json:"));
        forms.push_back(Expr::Seq({Expr::Literal(parameter_open + m.name + "\" string=\"false\">"), Expr::Ref(value),
                                   Expr::Literal(parameter_close)}));
      }
      const uint32_t param = b.declare(at);
      DI_RETURN_IF_ERROR(b.define(param, Expr::Alt(std::move(forms))));
      params.push_back(Expr::Ref(param));
      required.push_back(m.required);
    }
    // R(k, first): the parameters from the k-th on, "\n" before each but the first written.
    const size_t n = params.size();
    std::vector<uint32_t> rules(2 * (n + 1));
    for (size_t k = 0; k <= n; ++k)
      for (int first = 0; first < 2; ++first)
        rules[2 * k + first] = b.declare(prefix + "/params" + std::to_string(k) + (first ? "f" : "r"));
    for (size_t k = 0; k <= n; ++k) {
      for (int first = 0; first < 2; ++first) {
        Expr body = Expr::Literal(invoke_close);
        if (k < n) {
          std::vector<Expr> seq;
          if (!first) seq.push_back(Expr::Char('\n'));
          seq.push_back(params[k]);
          seq.push_back(Expr::Ref(rules[2 * (k + 1)]));
          body = required[k] ? Expr::Seq(std::move(seq))
                             : Expr::Alt({Expr::Seq(std::move(seq)), Expr::Ref(rules[2 * (k + 1) + first])});
        }
        DI_RETURN_IF_ERROR(b.define(rules[2 * k + first], body));
      }
    }
    function_params = rules[1];
    named.push_back(Expr::Seq({Expr::Literal(name + "\">\n"), Expr::Ref(rules[1])}));
    invokes.push_back(Expr::Seq({Expr::Literal(invoke_open), named.back()}));
  }
  if (invokes.empty()) return Status::Error("tool-call constraint: no tool to call").with_field("tool_choice");
  DI_RETURN_IF_ERROR(b.define(invoke, Expr::Alt(invokes)));
  DI_RETURN_IF_ERROR(b.define(more, Expr::Alt({Expr::Seq({Expr::Char('\n'), Expr::Ref(invoke), Expr::Ref(more)}),
                                               Expr::Literal("\n" + std::string(kToolCallsClose))})));
  uint32_t root = 0;
  DI_ASSIGN_OR_RETURN(const std::optional<uint32_t> content, content_rule(b, spec, options));
  if (choice == "auto" && content) {
    root = b.declare("root");
    DI_RETURN_IF_ERROR(b.define(root, Expr::Alt({Expr::Ref(*content),
                                                 Expr::Seq({Expr::Literal(std::string(kToolCallsStart) + ">\n"),
                                                            Expr::Ref(invoke), Expr::Ref(more)})})));
  } else if (choice == "auto") {
    const uint32_t block = b.declare("block");
    DI_RETURN_IF_ERROR(b.define(block, Expr::Seq({Expr::Literal(">\n"), Expr::Ref(invoke), Expr::Ref(more)})));
    // The text holds no fullwidth bar (so no DSML tag, begin or end of sentence) and no think
    // tag: nothing DeepseekV4OutputParser reads as markup or refuses in content.
    DI_ASSIGN_OR_RETURN(root, grammar::define_text_until(b, "root", kToolCallsStart, /*may_end=*/true, block,
                                                         {std::string(kFullwidthBar), std::string(kThinkStart),
                                                          std::string(kThinkEnd)}));
  } else if (choice == "required" || choice == "function") {
    root = b.declare("root");
    DI_RETURN_IF_ERROR(b.define(root, Expr::Seq({choice == "required" ? Expr::Alt(named) : Expr::Ref(function_params),
                                                 Expr::Ref(more)})));
  } else {
    return Status::Error("tool-call constraint: tool_choice '" + choice + "'").with_field("tool_choice");
  }
  DI_ASSIGN_OR_RETURN(grammar::Grammar g, b.build(root));
  return grammar::CompiledGrammar::FromBuilt(std::move(g));
}

}  // namespace

grammar::JsonSchemaOptions tool_call_json_options(ToolCallFormat format, grammar::JsonSchemaOptions options) {
  // The server's parser reads numbers as doubles: exponents of two digits keep every number finite.
  options.max_exponent_digits = std::min<uint32_t>(options.max_exponent_digits, 2);
  if (format == ToolCallFormat::kDeepseekV4) {
    options.escaped_code_points = {{kFullwidthBarCodePoint, kFullwidthBarCodePoint}};
  } else {
    options.escape_less_than = true;
  }
  return options;
}

Result<grammar::CompiledGrammar> compile_tool_call_grammar(std::string_view text, grammar::JsonSchemaOptions options) {
  const json spec = json::parse(text, nullptr, false);
  if (spec.is_discarded() || !find(spec, "tools") || !spec["tools"].is_array())
    return Status::Error("tool-call constraint: not a tool list");
  for (const char* key : {"format", "tool_choice", "function"})
    if (!find(spec, key) || !spec[key].is_string()) return Status::Error(std::string("tool-call constraint: no ") + key);
  for (const json& tool : spec["tools"]) {
    if (!find(tool, "name") || !tool["name"].is_string() || !find(tool, "index") || !tool["index"].is_number_unsigned() ||
        !find(tool, "strict") || !tool["strict"].is_boolean() ||
        ((tool["strict"].get<bool>() || spec["format"] == "deepseek-v4") && !find(tool, "parameters")))
      return Status::Error("tool-call constraint: a tool needs name, index, strict and, when strict or in DSML, parameters");
  }
  if (spec["format"] == "deepseek-v4")
    return compile_dsml_grammar(spec, tool_call_json_options(ToolCallFormat::kDeepseekV4, options));
  options = tool_call_json_options(ToolCallFormat::kDeepseekV3, options);
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
  DI_ASSIGN_OR_RETURN(const std::optional<uint32_t> content, content_rule(b, spec, options));
  if (choice == "auto") {
    const uint32_t block = b.declare("calls");
    DI_RETURN_IF_ERROR(b.define(block, Expr::Seq({Expr::Literal(call_begin), Expr::Ref(call), Expr::Ref(more)})));
    if (content) {
      root = b.declare("root");
      DI_RETURN_IF_ERROR(b.define(root, Expr::Alt({Expr::Ref(*content), Expr::Seq({Expr::Literal(calls_begin),
                                                                                    Expr::Ref(block)})})));
    } else {
      DI_ASSIGN_OR_RETURN(root, grammar::define_text_until(b, "root", calls_begin, /*may_end=*/true, block));
    }
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
