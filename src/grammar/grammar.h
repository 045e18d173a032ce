// Grammar: a context-free grammar over bytes in flat form, what every front end (EBNF text,
// regex, JSON Schema) lowers to and what the matcher runs.
//
// Every rule is a list of alternatives; an alternative is a run of elements in `elements`
// ended by a kEnd element. An element matches one byte of a ByteSet or a whole rule. The
// grammar is checked when built (GrammarBuilder): every rule is defined, and no rule is
// left-recursive in a way that would grow the parse stack without consuming input.
// Immutable once built; shared between matchers through shared_ptr<const Grammar>.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/byte_set.h"

namespace deepinfer::grammar {

enum class ElementKind : uint8_t {
  kBytes,  // value: index into byte_sets
  kRule,   // value: rule id
  kEnd,    // ends an alternative
};

struct Element {
  ElementKind kind;
  uint32_t value;
};

struct Rule {
  std::string name;     // as written, or a generated helper name ("name/3")
  uint32_t first_alt;   // index into alt_starts
  uint32_t n_alts;
};

struct Grammar {
  std::vector<Element> elements;
  std::vector<uint32_t> alt_starts;  // index into elements of each alternative's first element
  std::vector<Rule> rules;
  std::vector<ByteSet> byte_sets;
  uint32_t root = 0;
};

// Bounds on what a compile may build, so that no input can stall or exhaust the process.
struct GrammarLimits {
  size_t max_elements = 1u << 20;   // elements of the flat grammar, all rules together
  size_t max_rules = 1u << 17;
  uint32_t max_repeat = 10000;      // largest finite bound of one repetition {m,n}
  size_t max_nesting = 128;         // nesting of parentheses / schemas / regex groups
  size_t max_text_bytes = 1u << 20; // grammar, regex or schema text
};

}  // namespace deepinfer::grammar
