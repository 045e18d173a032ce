// Options of the JSON Schema compiler.
#pragma once

#include "grammar/expr.h"
#include "grammar/grammar.h"

namespace deepinfer::grammar {

struct JsonSchemaOptions {
  GrammarLimits limits;
  // Whether one space may follow each ',' and ':' (as `{"a": 1, "b": 2}`); otherwise the output
  // is fully compact. No other whitespace is ever allowed, so the output length stays bounded.
  bool separator_space = true;
  // Digits of a number's integer part, of its fraction, and of its exponent at most (a subset of
  // JSON numbers, so that a schema whose strings and arrays are bounded has bounded outputs).
  uint32_t max_integer_digits = 20;
  uint32_t max_fraction_digits = 20;
  uint32_t max_exponent_digits = 3;
  // Whether '<' inside strings is always written as the escape \u003c (the same JSON value), so
  // that the text never contains '<': JSON that sits inside markup whose tags start with '<'
  // (tool-call arguments) can then never close or open a tag.
  bool escape_less_than = false;
  // More code points (normalized) always written as \uXXXX escapes inside strings, and left out
  // of raw strings (compile_object_members): text that must never hold a marker made with them.
  CodePointRanges escaped_code_points;
  // Schemas nested deeper than this (properties in properties ..., $ref chains) fail to compile.
  size_t max_schema_depth = 64;
};

}  // namespace deepinfer::grammar
