#include "grammar/compiled_grammar.h"

#include <nlohmann/json.hpp>

#include "grammar/ebnf_parser.h"
#include "grammar/grammar_builder.h"
#include "grammar/json_schema_compiler.h"
#include "grammar/regex_parser.h"

namespace deepinfer::grammar {

Result<CompiledGrammar> CompiledGrammar::FromEbnf(std::string_view text, const GrammarLimits& limits) {
  DI_ASSIGN_OR_RETURN(Grammar g, parse_ebnf(text, limits));
  return CompiledGrammar(std::move(g));
}

Result<CompiledGrammar> CompiledGrammar::FromRegex(std::string_view pattern, const GrammarLimits& limits) {
  DI_ASSIGN_OR_RETURN(Expr e, parse_regex(pattern, limits));
  GrammarBuilder b(limits);
  const uint32_t root = b.declare("root");
  DI_RETURN_IF_ERROR(b.define(root, e));
  DI_ASSIGN_OR_RETURN(Grammar g, b.build(root));
  return CompiledGrammar(std::move(g));
}

Result<CompiledGrammar> CompiledGrammar::FromJsonSchema(std::string_view schema,
                                                        const JsonSchemaOptions& options) {
  if (schema.size() > options.limits.max_text_bytes) {
    return Status::Error("schema longer than " + std::to_string(options.limits.max_text_bytes) + " bytes");
  }
  const nlohmann::ordered_json j = nlohmann::ordered_json::parse(schema, nullptr, false);
  if (j.is_discarded()) return Status::Error("schema is not valid JSON");
  DI_ASSIGN_OR_RETURN(Grammar g, compile_json_schema(j, options));
  return CompiledGrammar(std::move(g));
}

CompiledGrammar CompiledGrammar::AnyJsonObject(const JsonSchemaOptions& options) {
  return CompiledGrammar(any_json_object_grammar(options));
}

}  // namespace deepinfer::grammar
