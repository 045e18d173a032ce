// Free text up to a marker: the grammar of "any bytes that do not contain `marker`", which may
// end there or, at the marker's first occurrence, continue with another rule. This is how a
// grammar lets a model write freely until it opens a piece of markup (a tool call) and then
// constrains what follows: the text before the marker can never contain the marker itself, so a
// parser that looks for the marker's first occurrence sees exactly where the grammar switched.
//
// The text may also be kept free of other strings (`forbidden`: special tokens' text, a character
// that only markup uses), except where they lie inside the marker's first occurrence.
//
// Built as the patterns' string-matching automaton (Aho-Corasick): one rule per longest suffix of
// the text so far that is a proper prefix of a pattern, each alternative a byte set followed by a
// tail reference, so matching it never grows the parse stack and is deterministic.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "grammar/grammar_builder.h"

namespace deepinfer::grammar {

// Declares and defines rule `name` (and helpers "name/text<k>") as: any bytes without `marker`
// or a string of `forbidden` (the empty text included), then, when `may_end`, the end, and when
// `then` is given, `marker` followed by the rule `then`; forbidden strings may occur inside that
// marker, nowhere else before `then`. The id of rule `name`.
Result<uint32_t> define_text_until(GrammarBuilder& b, const std::string& name, std::string_view marker, bool may_end,
                                   std::optional<uint32_t> then, const std::vector<std::string>& forbidden = {});

}  // namespace deepinfer::grammar
