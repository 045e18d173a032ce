// CompiledGrammar: a checked byte-level Grammar from one of the front ends, ready for matchers.
// Cheap to copy (a shared immutable grammar); safe to share between threads.
//
// Errors are for the person who wrote the input: they name the unsupported keyword (with its
// JSON pointer), the regex construct, or the grammar rule and position at fault, and every
// compile is bounded by GrammarLimits.
#pragma once

#include <memory>
#include <string_view>

#include "core/status.h"
#include "grammar/grammar.h"
#include "grammar/json_schema_options.h"

namespace deepinfer::grammar {

class CompiledGrammar {
 public:
  // Grammar text in the dialect of docs/grammar.md, rooted at rule `root`.
  static Result<CompiledGrammar> FromEbnf(std::string_view text, const GrammarLimits& limits = {});
  // A regular expression (the JSON Schema `pattern` dialect, docs/grammar.md) matched against the
  // whole output.
  static Result<CompiledGrammar> FromRegex(std::string_view pattern, const GrammarLimits& limits = {});
  // Compact JSON text valid against a JSON Schema (given as JSON text).
  static Result<CompiledGrammar> FromJsonSchema(std::string_view schema,
                                                const JsonSchemaOptions& options = {});
  // Any JSON object (response_format json_object).
  static CompiledGrammar AnyJsonObject(const JsonSchemaOptions& options = {});
  // The grammar a GrammarBuilder built (checked by GrammarBuilder::build), e.g. one composed of
  // grammars compiled apart.
  static CompiledGrammar FromBuilt(Grammar built) { return CompiledGrammar(std::move(built)); }

  const std::shared_ptr<const Grammar>& grammar() const { return grammar_; }

 private:
  explicit CompiledGrammar(Grammar g) : grammar_(std::make_shared<const Grammar>(std::move(g))) {}
  std::shared_ptr<const Grammar> grammar_;
};

}  // namespace deepinfer::grammar
