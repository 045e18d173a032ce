// JSON Schema (draft 4 to 2020-12, the keywords below) to a grammar of compact JSON text whose
// every sentence validates against the schema.
//
// Supported: type (one or a list), enum, const, properties, required, additionalProperties,
// unevaluatedProperties/unevaluatedItems (once allOf/$ref are merged and anyOf/oneOf distributed,
// they act as additionalProperties / the items after the prefix), min/maxProperties where the
// declared properties decide them, items (schema or draft-4 tuple), prefixItems, additionalItems,
// minItems, maxItems, uniqueItems false, anyOf, oneOf (branches of disjoint types or told apart
// by a required const property), allOf (merged), $ref to "#..." JSON pointers ($defs,
// definitions; recursion included), minLength/maxLength, pattern, format (string_formats.h),
// minimum/maximum/exclusiveMinimum/exclusiveMaximum (integral bounds for numbers), multipleOf 1
// on integers, boolean schemas, and the annotations (title, description, default, ...).
// The other constraining keywords of the JSON Schema drafts (not, if/then/else, contains,
// patternProperties, propertyNames, dependencies, ...) fail, naming the keyword and its JSON
// pointer; nothing that constrains is silently ignored. Keywords of no draft are annotations to
// every validator, so they are ignored here as well.
//
// Where the full language of a schema is not expressible, the grammar keeps a subset (never a
// superset): properties come in declared order; with properties declared and additionalProperties
// absent no others are emitted; an array with prefixItems emits all of them; numbers have at most
// JsonSchemaOptions' digits.
#pragma once

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "grammar/grammar.h"
#include "grammar/json_schema_options.h"

namespace deepinfer::grammar {

Result<Grammar> compile_json_schema(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options);
// Any JSON object (response_format json_object).
Grammar any_json_object_grammar(const JsonSchemaOptions& options);

}  // namespace deepinfer::grammar
