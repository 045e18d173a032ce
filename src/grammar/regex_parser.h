// Regular expressions (the ECMA-262 subset JSON Schema `pattern` uses, docs/grammar.md) as an
// Expr over code points, matched against the whole text: '^' and '$' are allowed only at the
// ends of top-level alternatives. The regex becomes part of a grammar, which the matcher runs as
// a DFA built on the fly (linear time, no backtracking).
// Not supported, each with an error naming it: backreferences, lookaround, word boundaries,
// Unicode property escapes, anchors elsewhere, possessive quantifiers.
#pragma once

#include <string_view>

#include "core/status.h"
#include "grammar/expr.h"
#include "grammar/grammar.h"

namespace deepinfer::grammar {

Result<Expr> parse_regex(std::string_view pattern, const GrammarLimits& limits);

}  // namespace deepinfer::grammar
