// Shared by the grammar fuzz targets: after a compile succeeds, run the byte-level automaton on
// the input's bytes and check its invariants: a dead byte is one outside next_bytes(), a live
// state is reached only through allowed bytes, and compiles and steps stay within small limits.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/check.h"
#include "grammar/compiled_grammar.h"
#include "grammar/grammar_automaton.h"

namespace deepinfer::grammar {

// Limits small enough that every input runs in milliseconds.
inline GrammarLimits fuzz_limits() {
  GrammarLimits limits;
  limits.max_elements = 1u << 14;
  limits.max_rules = 1u << 12;
  limits.max_repeat = 200;
  limits.max_nesting = 32;
  return limits;
}

inline void walk_checked(const CompiledGrammar& g, std::string_view bytes) {
  AutomatonLimits limits;
  limits.max_stack_nodes = 1u << 14;
  limits.max_states = 1u << 12;
  limits.max_leaves_per_state = 256;
  GrammarAutomaton a(g.grammar(), limits);
  int32_t state = a.initial_state();
  for (char c : bytes) {
    if (state == GrammarAutomaton::kDead || !a.status().ok()) return;
    const bool allowed = a.next_bytes(state).contains(uint8_t(c));
    const int32_t next = a.step(state, uint8_t(c));
    DI_CHECK(allowed || next == GrammarAutomaton::kDead);
    DI_CHECK(next == GrammarAutomaton::kDead || !a.status().ok() || allowed);
    // Memoized: the same step gives the same state.
    DI_CHECK(a.step(state, uint8_t(c)) == next || !a.status().ok());
    state = next;
  }
  if (state != GrammarAutomaton::kDead && a.status().ok()) {
    DI_CHECK(a.accepts(state) || !a.next_bytes(state).empty());
  }
}

}  // namespace deepinfer::grammar
