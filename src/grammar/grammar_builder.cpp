#include "grammar/grammar_builder.h"

#include <algorithm>
#include <functional>

#include "grammar/utf8_ranges.h"

namespace deepinfer::grammar {

uint32_t GrammarBuilder::declare(const std::string& name) {
  auto it = by_name_.find(name);
  if (it != by_name_.end()) return it->second;
  const uint32_t id = uint32_t(names_.size());
  names_.push_back(name);
  defined_.push_back(false);
  bodies_.emplace_back();
  n_helpers_.push_back(0);
  by_name_.emplace(name, id);
  return id;
}

Status GrammarBuilder::count(size_t n) {
  n_elements_ += n;
  if (n_elements_ > limits_.max_elements) {
    return Status::Error("grammar too large: more than " + std::to_string(limits_.max_elements) +
                         " elements");
  }
  if (names_.size() > limits_.max_rules) {
    return Status::Error("grammar too large: more than " + std::to_string(limits_.max_rules) +
                         " rules");
  }
  return Status::Ok();
}

uint32_t GrammarBuilder::byte_set_index(const ByteSet& s) {
  auto [it, inserted] = byte_set_ids_.emplace(s, uint32_t(byte_sets_.size()));
  if (inserted) byte_sets_.push_back(s);
  return it->second;
}

Result<uint32_t> GrammarBuilder::import(const Grammar& g, const std::string& prefix) {
  std::vector<uint32_t> ids(g.rules.size());
  for (size_t r = 0; r < g.rules.size(); ++r) {
    const std::string name = prefix + g.rules[r].name;
    if (by_name_.count(name)) return Status::Error("rule '" + name + "' is defined twice");
    ids[r] = declare(name);
  }
  DI_RETURN_IF_ERROR(count(g.elements.size()));
  for (size_t r = 0; r < g.rules.size(); ++r) {
    const Rule& rule = g.rules[r];
    std::vector<Seq>& body = bodies_[ids[r]];
    for (uint32_t a = 0; a < rule.n_alts; ++a) {
      Seq seq;
      for (uint32_t p = g.alt_starts[rule.first_alt + a]; g.elements[p].kind != ElementKind::kEnd; ++p) {
        const Element e = g.elements[p];
        seq.push_back(e.kind == ElementKind::kBytes ? Element{ElementKind::kBytes, byte_set_index(g.byte_sets[e.value])}
                                                    : Element{ElementKind::kRule, ids[e.value]});
      }
      body.push_back(std::move(seq));
    }
    defined_[ids[r]] = true;
  }
  return ids[g.root];
}

Result<uint32_t> GrammarBuilder::add_helper(uint32_t owner, std::vector<Seq> alts) {
  const uint32_t id = declare(names_[owner] + "/" + std::to_string(++n_helpers_[owner]));
  size_t n = 0;
  for (const Seq& s : alts) n += s.size() + 1;
  DI_RETURN_IF_ERROR(count(n));
  defined_[id] = true;
  bodies_[id] = std::move(alts);
  return id;
}

Result<uint32_t> GrammarBuilder::class_rule(uint32_t owner, const CodePointRanges& ranges) {
  auto it = class_rules_.find(ranges);
  if (it != class_rules_.end()) return it->second;
  std::vector<Seq> alts;
  for (const std::vector<ByteSet>& seq : utf8_byte_sequences(ranges)) {
    Seq s;
    for (const ByteSet& b : seq) s.push_back({ElementKind::kBytes, byte_set_index(b)});
    alts.push_back(std::move(s));
  }
  DI_ASSIGN_OR_RETURN(uint32_t id, add_helper(owner, std::move(alts)));
  class_rules_.emplace(ranges, id);
  return id;
}

// One element standing for `e`: itself when it is one byte set or rule, else a helper rule.
Result<Element> GrammarBuilder::as_element(uint32_t owner, const Expr& e) {
  Seq seq;
  DI_RETURN_IF_ERROR(lower_into(owner, e, seq));
  if (seq.size() == 1) return seq[0];
  DI_ASSIGN_OR_RETURN(uint32_t id, add_helper(owner, {std::move(seq)}));
  return Element{ElementKind::kRule, id};
}

Status GrammarBuilder::lower_into(uint32_t owner, const Expr& e, Seq& out) {
  switch (e.kind) {
    case Expr::Kind::kSeq:
      for (const Expr& c : e.children) DI_RETURN_IF_ERROR(lower_into(owner, c, out));
      return Status::Ok();
    case Expr::Kind::kBytes:
      out.push_back({ElementKind::kBytes, byte_set_index(e.bytes)});
      return Status::Ok();
    case Expr::Kind::kRule:
      out.push_back({ElementKind::kRule, e.rule});
      return Status::Ok();
    case Expr::Kind::kCodePoints: {
      if (!e.ranges.empty() && e.ranges.back().second < 0x80) {
        ByteSet s;
        for (auto [lo, hi] : e.ranges) s |= ByteSet::Range(uint8_t(lo), uint8_t(hi));
        out.push_back({ElementKind::kBytes, byte_set_index(s)});
        return Status::Ok();
      }
      DI_ASSIGN_OR_RETURN(uint32_t id, class_rule(owner, e.ranges));
      out.push_back({ElementKind::kRule, id});
      return Status::Ok();
    }
    case Expr::Kind::kAlt: {
      std::vector<Seq> alts;
      DI_RETURN_IF_ERROR(lower_alternatives(owner, e, alts));
      DI_ASSIGN_OR_RETURN(uint32_t id, add_helper(owner, std::move(alts)));
      out.push_back({ElementKind::kRule, id});
      return Status::Ok();
    }
    case Expr::Kind::kRepeat: {
      const uint32_t finite = e.max == kUnbounded ? e.min : e.max;
      if (finite > limits_.max_repeat) {
        return Status::Error("repetition bound " + std::to_string(finite) + " exceeds the limit " +
                             std::to_string(limits_.max_repeat));
      }
      if (e.max != kUnbounded && e.max < e.min) {
        return Status::Error("repetition {" + std::to_string(e.min) + "," + std::to_string(e.max) +
                             "} has max < min");
      }
      DI_ASSIGN_OR_RETURN(Element item, as_element(owner, e.children[0]));
      DI_RETURN_IF_ERROR(count(e.min));
      for (uint32_t i = 0; i < e.min; ++i) out.push_back(item);
      if (e.max == kUnbounded) {
        // star ::= item star | ""
        const uint32_t star = declare(names_[owner] + "/" + std::to_string(++n_helpers_[owner]));
        DI_RETURN_IF_ERROR(count(4));
        defined_[star] = true;
        bodies_[star] = {{item, {ElementKind::kRule, star}}, {}};
        out.push_back({ElementKind::kRule, star});
      } else if (e.max > e.min) {
        // opt_1 ::= item | "" ; opt_k ::= item opt_{k-1} | "": "up to k items", shared by every
        // bounded repetition of the same item.
        std::vector<uint32_t>& chain = optional_chains_[{uint8_t(item.kind), item.value}];
        while (chain.size() < e.max - e.min) {
          Seq take{item};
          if (!chain.empty()) take.push_back({ElementKind::kRule, chain.back()});
          DI_ASSIGN_OR_RETURN(uint32_t next, add_helper(owner, {std::move(take), {}}));
          chain.push_back(next);
        }
        out.push_back({ElementKind::kRule, chain[e.max - e.min - 1]});
      }
      return Status::Ok();
    }
  }
  return Status::Ok();
}

Status GrammarBuilder::lower_alternatives(uint32_t owner, const Expr& e, std::vector<Seq>& alts) {
  if (e.kind != Expr::Kind::kAlt) {
    Seq seq;
    DI_RETURN_IF_ERROR(lower_into(owner, e, seq));
    alts.push_back(std::move(seq));
    return Status::Ok();
  }
  for (const Expr& c : e.children) DI_RETURN_IF_ERROR(lower_alternatives(owner, c, alts));
  return Status::Ok();
}

Status GrammarBuilder::define(uint32_t rule, const Expr& body) {
  if (defined_[rule]) return Status::Error("rule '" + names_[rule] + "' is defined twice");
  defined_[rule] = true;
  std::vector<Seq> alts;
  DI_RETURN_IF_ERROR(lower_alternatives(rule, body, alts));
  size_t n = 0;
  for (const Seq& s : alts) n += s.size() + 1;
  DI_RETURN_IF_ERROR(count(n));
  bodies_[rule] = std::move(alts);
  return Status::Ok();
}

// Left recursion that grows the stack: a cycle in the graph "A may start with B" (B preceded
// only by nullable elements in some alternative of A) through at least one edge whose reference
// is not the last element of its alternative. Cycles of tail references alone are harmless.
Status GrammarBuilder::check_left_recursion() const {
  const size_t n = names_.size();
  std::vector<bool> nullable(n, false);
  for (bool changed = true, forward = true; changed; forward = !forward) {
    changed = false;
    for (size_t i = 0; i < n; ++i) {
      const size_t r = forward ? i : n - 1 - i;
      if (nullable[r]) continue;
      for (const Seq& s : bodies_[r]) {
        bool all = std::all_of(s.begin(), s.end(), [&](const Element& e) {
          return e.kind == ElementKind::kRule && nullable[e.value];
        });
        if (all) {
          nullable[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  struct Edge {
    uint32_t to;
    bool tail;
  };
  std::vector<std::vector<Edge>> edges(n);
  for (size_t r = 0; r < n; ++r) {
    for (const Seq& s : bodies_[r]) {
      for (size_t i = 0; i < s.size(); ++i) {
        if (s[i].kind != ElementKind::kRule) break;
        edges[r].push_back({s[i].value, i + 1 == s.size()});
        if (!nullable[s[i].value]) break;
      }
    }
  }
  // Strongly connected components (iterative Tarjan).
  std::vector<int> index(n, -1), low(n, 0), comp(n, -1);
  std::vector<bool> on_stack(n, false);
  std::vector<uint32_t> stack;
  int next_index = 0, n_comp = 0;
  for (uint32_t start = 0; start < n; ++start) {
    if (index[start] >= 0) continue;
    std::vector<std::pair<uint32_t, size_t>> work{{start, 0}};
    index[start] = low[start] = next_index++;
    stack.push_back(start);
    on_stack[start] = true;
    while (!work.empty()) {
      auto& [v, i] = work.back();
      if (i < edges[v].size()) {
        const uint32_t w = edges[v][i++].to;
        if (index[w] < 0) {
          index[w] = low[w] = next_index++;
          stack.push_back(w);
          on_stack[w] = true;
          work.push_back({w, 0});
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      const uint32_t done = v;
      work.pop_back();
      if (!work.empty()) low[work.back().first] = std::min(low[work.back().first], low[done]);
      if (low[done] == index[done]) {
        uint32_t w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = false;
          comp[w] = n_comp;
        } while (w != done);
        ++n_comp;
      }
    }
  }
  for (size_t r = 0; r < n; ++r) {
    for (const Edge& e : edges[r]) {
      if (!e.tail && comp[e.to] == comp[r]) {
        return Status::Error("rule '" + names_[r] + "' is left-recursive (through '" +
                             names_[e.to] + "')");
      }
    }
  }
  return Status::Ok();
}

// The root must derive some finite text: some alternative of it made only of bytes and rules
// that do.
Status GrammarBuilder::check_productive(uint32_t root) const {
  std::vector<bool> productive(names_.size(), false);
  // Passes alternate direction: rules refer to both earlier and later ids.
  for (bool changed = true, forward = true; changed; forward = !forward) {
    changed = false;
    for (size_t i = 0; i < names_.size(); ++i) {
      const size_t r = forward ? i : names_.size() - 1 - i;
      if (productive[r]) continue;
      for (const Seq& s : bodies_[r]) {
        if (std::all_of(s.begin(), s.end(), [&](const Element& e) {
              return e.kind == ElementKind::kBytes || productive[e.value];
            })) {
          productive[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  if (!productive[root]) {
    return Status::Error("the grammar matches no text: rule '" + names_[root] + "' never ends");
  }
  return Status::Ok();
}

Result<Grammar> GrammarBuilder::build(uint32_t root) {
  for (size_t r = 0; r < names_.size(); ++r) {
    if (!defined_[r]) return Status::Error("rule '" + names_[r] + "' is used but not defined");
  }
  DI_RETURN_IF_ERROR(check_left_recursion());
  DI_RETURN_IF_ERROR(check_productive(root));
  Grammar g;
  g.root = root;
  g.byte_sets = std::move(byte_sets_);
  g.elements.reserve(n_elements_);
  for (size_t r = 0; r < names_.size(); ++r) {
    g.rules.push_back({std::move(names_[r]), uint32_t(g.alt_starts.size()),
                       uint32_t(bodies_[r].size())});
    for (const Seq& s : bodies_[r]) {
      g.alt_starts.push_back(uint32_t(g.elements.size()));
      g.elements.insert(g.elements.end(), s.begin(), s.end());
      g.elements.push_back({ElementKind::kEnd, 0});
    }
  }
  return g;
}

}  // namespace deepinfer::grammar
