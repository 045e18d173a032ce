// JSON Schema (draft 4 to 2020-12, the keywords below) to a grammar of compact JSON text whose
// every sentence validates against the schema.
//
// Supported: type (one or a list), enum, const, properties, required, additionalProperties,
// patternProperties (one pattern alone: the object {} or one member whose key matches it),
// unevaluatedProperties/unevaluatedItems (once allOf/$ref are merged and anyOf/oneOf distributed,
// they act as additionalProperties / the items after the prefix), min/maxProperties where the
// declared properties decide them, items (schema or draft-4 tuple), prefixItems, additionalItems,
// minItems, maxItems, uniqueItems false, anyOf, oneOf (branches of disjoint types or told apart
// by a required const property), allOf (merged), $ref to "#..." JSON pointers ($defs,
// definitions; recursion included), minLength/maxLength, pattern, format (string_formats.h),
// minimum/maximum/exclusiveMinimum/exclusiveMaximum (integral bounds for numbers), multipleOf 1
// on integers, boolean schemas, and the annotations (title, description, default, ...).
// The other constraining keywords of the JSON Schema drafts (not, if/then/else, contains,
// propertyNames, dependencies, ...) fail, naming the keyword and its JSON
// pointer; nothing that constrains is silently ignored. Keywords of no draft are annotations to
// every validator, so they are ignored here as well.
//
// Where the full language of a schema is not expressible, the grammar keeps a subset (never a
// superset): properties come in declared order; with properties declared and additionalProperties
// absent no others are emitted; an array with prefixItems emits all of them; numbers have at most
// JsonSchemaOptions' digits.
//
// compile_object_members lists an object schema's members one by one, for markup that writes
// each member apart rather than as one JSON object (DeepSeek-V4's DSML tool-call parameters).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "grammar/grammar.h"
#include "grammar/json_schema_options.h"

namespace deepinfer::grammar {

Result<Grammar> compile_json_schema(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options);
struct ObjectMember {
  std::string name;
  bool required = false;
  // Its values as JSON text; absent when raw_string holds them all (a schema of strings only).
  std::optional<Grammar> json_value;
  // The raw text (unquoted, unescaped) of the string values it admits, without the code points
  // of JsonSchemaOptions::escaped_code_points; absent when it admits no string, or its strings
  // lie under anyOf/oneOf.
  std::optional<Grammar> raw_string;
};
// The members of object schema `schema` ($ref and allOf at its top merged) in the order the
// grammar of compile_json_schema emits them: the declared properties in order (and required ones
// that are not declared), each value's grammar compiled as there ($refs resolved against
// `schema`). Fails naming the keyword where the members cannot be listed: anyOf/oneOf/enum/const/
// patternProperties at the top, additionalProperties (or unevaluatedProperties) admitting undeclared members.
Result<std::vector<ObjectMember>> compile_object_members(const nlohmann::ordered_json& schema,
                                                         const JsonSchemaOptions& options);
// Any JSON object (response_format json_object).
Grammar any_json_object_grammar(const JsonSchemaOptions& options);

}  // namespace deepinfer::grammar
