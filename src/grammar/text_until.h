// Free text up to a marker: the grammar of "any bytes that do not contain `marker`", which may
// end there or, at the marker's first occurrence, continue with another rule. This is how a
// grammar lets a model write freely until it opens a piece of markup (a tool call) and then
// constrains what follows: the text before the marker can never contain the marker itself, so a
// parser that looks for the marker's first occurrence sees exactly where the grammar switched.
//
// Built as the marker's string-matching automaton (Knuth-Morris-Pratt): one rule per length of
// the marker's prefix that the text so far ends with, each alternative a byte set followed by a
// tail reference, so matching it never grows the parse stack and is deterministic.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "grammar/grammar_builder.h"

namespace deepinfer::grammar {

// Declares and defines rule `name` (and helpers "name/text<k>") as: any bytes without `marker`
// (the empty text included), then, when `may_end`, the end, and when `then` is given, `marker` followed by the
// rule `then`. The id of rule `name`.
Result<uint32_t> define_text_until(GrammarBuilder& b, const std::string& name, std::string_view marker, bool may_end,
                                   std::optional<uint32_t> then);

}  // namespace deepinfer::grammar
