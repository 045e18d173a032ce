// Helpers of the grammar tests: whole-text matching through the byte-level automaton.
#pragma once

#include <string_view>

#include "grammar/compiled_grammar.h"
#include "grammar/grammar_automaton.h"

namespace deepinfer::grammar {

// Whether `text` is a complete sentence of `g`.
inline bool matches(const CompiledGrammar& g, std::string_view text) {
  GrammarAutomaton a(g.grammar());
  const int32_t s = a.walk(a.initial_state(), text);
  return s != GrammarAutomaton::kDead && a.accepts(s);
}

// Whether `text` can be continued to a sentence of `g` (a prefix of one).
inline bool is_prefix(const CompiledGrammar& g, std::string_view text) {
  GrammarAutomaton a(g.grammar());
  return a.walk(a.initial_state(), text) != GrammarAutomaton::kDead;
}

}  // namespace deepinfer::grammar
