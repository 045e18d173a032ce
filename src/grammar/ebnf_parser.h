// The grammar text dialect (docs/grammar.md): GBNF-like rules `name ::= body`, a body of
// "literals", [classes], `.`, rule names, ( groups ), alternatives `|` and the postfix
// quantifiers * + ? {m} {m,} {m,n}; `#` comments; the sentence is rule `root`.
#pragma once

#include <string_view>

#include "core/status.h"
#include "grammar/grammar.h"

namespace deepinfer::grammar {

// The flat grammar of `text`; errors give line and column.
Result<Grammar> parse_ebnf(std::string_view text, const GrammarLimits& limits);

}  // namespace deepinfer::grammar
