// GrammarBuilder: rules declared by name and defined by an Expr, lowered to a flat Grammar.
//
// Lowering gives nested alternatives, repetitions and multi-byte character classes helper rules
// (named "<rule>/<n>"); identical character classes share one, and bounded repetitions of one
// element share their chain of "up to k" rules. A repetition is a right-recursive
// chain whose recursive reference is the last element of its alternative, which the matcher runs
// without growing its stack. build() fails, naming the rule, when a declared rule has no
// definition or a rule can reach itself before consuming input other than through such a tail
// reference (left recursion), and fails when a limit of GrammarLimits is passed.
#pragma once

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "grammar/expr.h"
#include "grammar/grammar.h"

namespace deepinfer::grammar {

class GrammarBuilder {
 public:
  explicit GrammarBuilder(GrammarLimits limits = {}) : limits_(limits) {}

  // The id of rule `name`, declaring it on first use.
  uint32_t declare(const std::string& name);
  bool is_defined(uint32_t rule) const { return defined_[rule]; }
  // Defines a declared rule; fails when it is already defined or a limit is passed.
  Status define(uint32_t rule, const Expr& body);
  // Copies every rule of the built grammar `g` into this builder, each named `prefix` + its
  // name; the id of g's root here. Fails when such a name is already declared or a limit is
  // passed. This is how grammars compiled apart (say, one JSON Schema per tool) are composed.
  Result<uint32_t> import(const Grammar& g, const std::string& prefix);
  // The grammar rooted at `root`; the builder is spent afterwards.
  Result<Grammar> build(uint32_t root);

 private:
  using Seq = std::vector<Element>;
  Status lower_alternatives(uint32_t owner, const Expr& e, std::vector<Seq>& alts);
  Status lower_into(uint32_t owner, const Expr& e, Seq& out);
  // A helper rule of `owner` defined by `alts`; its id.
  Result<uint32_t> add_helper(uint32_t owner, std::vector<Seq> alts);
  Result<uint32_t> class_rule(uint32_t owner, const CodePointRanges& ranges);
  Result<Element> as_element(uint32_t owner, const Expr& e);
  uint32_t byte_set_index(const ByteSet& s);
  Status count(size_t n_elements);
  Status check_left_recursion() const;
  Status check_productive(uint32_t root) const;

  GrammarLimits limits_;
  std::vector<std::string> names_;
  std::vector<bool> defined_;
  std::vector<std::vector<Seq>> bodies_;
  std::vector<uint32_t> n_helpers_;
  std::unordered_map<std::string, uint32_t> by_name_;
  std::map<ByteSet, uint32_t> byte_set_ids_;
  std::vector<ByteSet> byte_sets_;
  std::map<CodePointRanges, uint32_t> class_rules_;
  // Per repeated element (kind, value): the rules "up to 1, 2, ... of it".
  std::map<std::pair<uint8_t, uint32_t>, std::vector<uint32_t>> optional_chains_;
  size_t n_elements_ = 0;
};

}  // namespace deepinfer::grammar
