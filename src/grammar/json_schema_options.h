// Options of the JSON Schema compiler.
#pragma once

#include "grammar/grammar.h"

namespace deepinfer::grammar {

struct JsonSchemaOptions {
  GrammarLimits limits;
  // Whether one space may follow each ',' and ':' (as `{"a": 1, "b": 2}`); otherwise the output
  // is fully compact. No other whitespace is ever allowed, so the output length stays bounded.
  bool separator_space = true;
  // Schemas nested deeper than this (properties in properties ..., $ref chains) fail to compile.
  size_t max_schema_depth = 64;
};

}  // namespace deepinfer::grammar
