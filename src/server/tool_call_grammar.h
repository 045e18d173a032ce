// Strict tool arguments: the grammar of a chat answer when some of the request's tools have
// `"strict": true`, over the text the model writes after the prompt (and after the forced
// tool-call prefix of tool_choice "required" / a named function, server/tool_choice.h).
//
// DeepSeek-V3 format (V3.1 the same without "function", "\n```json\n" and "\n```"):
//   auto:      TEXT | TEXT <｜tool▁calls▁begin｜> CALLS       (TEXT never contains that marker)
//   required:  NAME_i ARGS_TAIL_i MORE                       (after "...<｜tool▁sep｜>")
//   function:  ARGS_f TAIL MORE_f                            (after "NAME\n```json\n")
//   CALLS  ::= <｜tool▁call▁begin｜> CALL MORE
//   CALL_i ::= "function" <｜tool▁sep｜> NAME_i "\n```json\n" ARGS_i "\n```" <｜tool▁call▁end｜>
//   MORE   ::= "\n" <｜tool▁call▁begin｜> CALL MORE | <｜tool▁calls▁end｜>
// With a content schema, TEXT (auto) is replaced by JSON of that schema, and the answer is either
// that JSON or the calls: CONTENT | <｜tool▁calls▁begin｜> CALLS; its strings write '<' as \u003c.
// ARGS_i: a strict tool's `parameters` schema (an object; absent: no parameters, `{}`), a
// non-strict tool's any JSON object; as compact JSON whose strings write '<' as \u003c, so the
// arguments can never contain a marker. A named function's further calls are of it too. After
// the calls block the answer ends. Every sentence is parsed by chat::ToolCallParser into those
// calls, with `arguments` valid against their tool's schema.
//
// DeepSeek-V4 (DSML, grammar in tool_call_grammar.cpp): the same choices over DSML invokes, each
// parameter a declared property of the tool's schema (grammar::compile_object_members) written
// as DeepSeek's encoder writes it, string="true" with a string's raw text or string="false" with
// JSON; required parameters present, optional ones in declared order or left out; several invokes
// in one block. A non-strict tool's parameters are its declared properties, any value. Every
// sentence is read back by chat::DeepseekV4OutputParser as those calls.
//
// The request is first put in one canonical text (tool_call_constraint_text), which is what
// GrammarCache compiles and keys on.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "grammar/compiled_grammar.h"
#include "server/tool_choice.h"

namespace deepinfer {

// Whether some tool of `tools` (the request's array, or null) has function.strict true.
bool has_strict_tools(const nlohmann::ordered_json& tools);

// The constraint text for `tools` (the request's validated array) under `tool_choice` ("auto",
// "required" or "function", with `function` its name). Errors name the field at fault
// (tools[i].function.name / .parameters): names the parser could not read back or that two tools
// share, parameters that are not an object schema; a format without tool-call markup (kUnknown).
// `content`: the JSON Schema the answer's text follows instead of free text (response_format's;
// {"type": "object"} for json_object), or null. With it, an "auto" answer is that JSON or the
// calls, not both.
Result<std::string> tool_call_constraint_text(ToolCallFormat format, const std::string& tool_choice,
                                              const std::string& function, const nlohmann::ordered_json& tools,
                                              const nlohmann::ordered_json& content = nullptr);

// The JSON options the arguments (and content) of `format`'s tool calls compile under: `options`
// with exponents of at most two digits and '<' (V3/V3.1) or '｜' (DSML) escaped in strings.
grammar::JsonSchemaOptions tool_call_json_options(ToolCallFormat format, grammar::JsonSchemaOptions options);

// The grammar of a constraint text. Errors name tools[i].function.parameters (or
// response_format.json_schema.schema, with that field) and the keyword.
// `options` bound every schema's compile (escape_less_than is set here).
Result<grammar::CompiledGrammar> compile_tool_call_grammar(std::string_view text, grammar::JsonSchemaOptions options);

}  // namespace deepinfer
