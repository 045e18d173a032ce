#include "grammar/grammar_automaton.h"

#include <algorithm>

#include "core/check.h"

namespace deepinfer::grammar {

size_t GrammarAutomaton::KeyHash::operator()(const std::vector<uint32_t>& v) const {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ v.size();
  for (uint32_t x : v) h = (h ^ x) * 0x100000001B3ull + (h >> 29);
  return size_t(h);
}

GrammarAutomaton::GrammarAutomaton(std::shared_ptr<const Grammar> grammar, AutomatonLimits limits)
    : grammar_(std::move(grammar)), limits_(limits) {
  compute_min_rest();
  nodes_.push_back({0, 0});
  nodes_.push_back({0, 0});  // kOpenRest, never interned by key
  mark_.assign(2, 0);
  ++generation_;
  scratch_leaves_.clear();
  scratch_accept_ = false;
  scratch_open_ = false;
  const Rule& root = grammar_->rules[grammar_->root];
  for (uint32_t a = 0; a < root.n_alts; ++a) {
    if (!expand(grammar_->alt_starts[root.first_alt + a], 0)) return;
  }
  initial_ = intern_state();
  if (initial_ == kDead) fail("the grammar matches no text");
}

void GrammarAutomaton::fail(std::string message) {
  if (status_.ok()) status_ = Status::Error(std::move(message));
}

uint32_t GrammarAutomaton::intern_node(uint32_t pos, uint32_t parent) {
  const uint64_t key = (uint64_t(pos) << 32) | parent;
  auto [it, inserted] = node_ids_.emplace(key, uint32_t(nodes_.size()));
  if (inserted) {
    if (nodes_.size() >= limits_.max_stack_nodes) {
      node_ids_.erase(it);
      fail("grammar matcher: more than " + std::to_string(limits_.max_stack_nodes) +
           " parse stack nodes");
      return UINT32_MAX;
    }
    nodes_.push_back({pos, parent});
    mark_.push_back(0);
  }
  return it->second;
}

bool GrammarAutomaton::expand(uint32_t pos, uint32_t parent) {
  const Grammar& g = *grammar_;
  const uint32_t first = intern_node(pos, parent);
  if (first == UINT32_MAX) return false;
  work_.clear();
  work_.push_back(first);
  while (!work_.empty()) {
    const uint32_t id = work_.back();
    work_.pop_back();
    if (mark_[id] == generation_) continue;
    mark_[id] = generation_;
    const Node node = nodes_[id];
    const Element e = g.elements[node.pos];
    if (e.kind == ElementKind::kBytes) {
      scratch_leaves_.push_back(id);
      if (scratch_leaves_.size() > limits_.max_leaves_per_state) {
        fail("grammar matcher: more than " + std::to_string(limits_.max_leaves_per_state) +
             " parses alive at once (the grammar is too ambiguous)");
        return false;
      }
    } else if (e.kind == ElementKind::kEnd) {
      if (node.parent == 0) {
        scratch_accept_ = true;
      } else if (node.parent == kOpenRest) {
        scratch_open_ = true;
      } else {
        work_.push_back(node.parent);
      }
    } else {
      uint32_t base = node.parent;
      if (g.elements[node.pos + 1].kind != ElementKind::kEnd) {
        base = intern_node(node.pos + 1, node.parent);
        if (base == UINT32_MAX) return false;
      }
      const Rule& rule = g.rules[e.value];
      for (uint32_t a = 0; a < rule.n_alts; ++a) {
        const uint32_t child = intern_node(g.alt_starts[rule.first_alt + a], base);
        if (child == UINT32_MAX) return false;
        work_.push_back(child);
      }
    }
  }
  return true;
}

int32_t GrammarAutomaton::intern_state() {
  std::sort(scratch_leaves_.begin(), scratch_leaves_.end());
  if (scratch_leaves_.empty() && !scratch_accept_ && !scratch_open_) return kDead;
  std::vector<uint32_t> key = scratch_leaves_;
  key.push_back((scratch_accept_ ? 1 : 0) | (scratch_open_ ? 2 : 0));
  auto it = state_ids_.find(key);
  if (it != state_ids_.end()) return it->second;
  if (states_.size() >= limits_.max_states) {
    fail("grammar matcher: more than " + std::to_string(limits_.max_states) + " parser states");
    return kDead;
  }
  State s{uint32_t(leaves_.size()), uint32_t(scratch_leaves_.size()), scratch_accept_, scratch_open_, {}};
  for (uint32_t leaf : scratch_leaves_) {
    s.next |= grammar_->byte_sets[grammar_->elements[nodes_[leaf].pos].value];
  }
  leaves_.insert(leaves_.end(), scratch_leaves_.begin(), scratch_leaves_.end());
  const int32_t id = int32_t(states_.size());
  states_.push_back(s);
  table_of_.push_back(-1);
  state_ids_.emplace(std::move(key), id);
  return id;
}

int32_t GrammarAutomaton::step_slow(int32_t state, uint8_t byte) {
  DI_CHECK(state >= 0 && size_t(state) < states_.size());
  int32_t next = kDead;
  if (states_[size_t(state)].next.contains(byte) && status_.ok()) {
    ++generation_;
    scratch_leaves_.clear();
    scratch_accept_ = false;
    scratch_open_ = false;
    const State s = states_[size_t(state)];
    bool ok = true;
    for (uint32_t i = 0; i < s.n_leaves && ok; ++i) {
      const Node leaf = nodes_[leaves_[s.first_leaf + i]];
      if (grammar_->byte_sets[grammar_->elements[leaf.pos].value].contains(byte)) {
        ok = expand(leaf.pos + 1, leaf.parent);
      }
    }
    if (!ok) return kDead;
    next = intern_state();
    if (!status_.ok()) return kDead;
  }
  if (table_of_[size_t(state)] < 0) {
    if ((tables_.size() + 256) * sizeof(int32_t) > limits_.transition_cache_bytes) {
      tables_.clear();
      std::fill(table_of_.begin(), table_of_.end(), -1);
    }
    table_of_[size_t(state)] = int32_t(tables_.size() / 256);
    tables_.resize(tables_.size() + 256, kUnknown);
  }
  tables_[size_t(table_of_[size_t(state)]) * 256 + byte] = next;
  return next;
}

int32_t GrammarAutomaton::detach(int32_t state) {
  DI_CHECK(state >= 0 && size_t(state) < states_.size());
  if (!status_.ok()) return kDead;
  const State s = states_[size_t(state)];
  // The cut: the deepest node on the path to the bottom of every leaf's grandparent (or of the
  // leaf's shallowest non-bottom frame).
  auto anchor = [&](uint32_t id) {
    for (int up = 0; up < 2 && nodes_[id].parent != 0; ++up) id = nodes_[id].parent;
    return id;
  };
  std::vector<uint32_t> path;  // from the first anchor to the bottom
  for (uint32_t id = anchor(leaves_[s.first_leaf]);; id = nodes_[id].parent) {
    path.push_back(id);
    if (id == 0) break;
  }
  size_t common = 0;  // index in path of the deepest node common to all anchors so far
  ++generation_;
  for (size_t i = 0; i < path.size(); ++i) mark_[path[i]] = generation_;
  for (uint32_t i = 1; i < s.n_leaves; ++i) {
    uint32_t id = anchor(leaves_[s.first_leaf + i]);
    while (mark_[id] != generation_) id = nodes_[id].parent;
    common = std::max(common, size_t(std::find(path.begin(), path.end(), id) - path.begin()));
  }
  const uint32_t top = path[common];
  const uint32_t bottom = top == 0 ? 0 : kOpenRest;
  scratch_leaves_.clear();
  scratch_accept_ = false;
  scratch_open_ = false;
  std::vector<uint32_t> chain;
  for (uint32_t i = 0; i < s.n_leaves; ++i) {
    chain.clear();
    for (uint32_t id = leaves_[s.first_leaf + i]; id != 0; id = nodes_[id].parent) {
      chain.push_back(nodes_[id].pos);
      if (id == top) break;
    }
    uint32_t id = bottom;
    for (size_t k = chain.size(); k-- > 0;) {
      id = intern_node(chain[k], id);
      if (id == UINT32_MAX) return kDead;
    }
    scratch_leaves_.push_back(id);
  }
  std::sort(scratch_leaves_.begin(), scratch_leaves_.end());
  scratch_leaves_.erase(std::unique(scratch_leaves_.begin(), scratch_leaves_.end()), scratch_leaves_.end());
  const int32_t detached = intern_state();
  return status_.ok() ? detached : kDead;
}

std::string GrammarAutomaton::frame_key(int32_t state) const {
  const Grammar& g = *grammar_;
  const State& s = states_[size_t(state)];
  std::unordered_map<uint32_t, uint32_t> renumbered;  // rule id -> order of discovery
  std::vector<uint32_t> queue;
  std::string key;
  auto put32 = [&](uint32_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
  // One alternative's elements from `pos` to its end.
  auto put_rest = [&](uint32_t pos) {
    for (;; ++pos) {
      const Element e = g.elements[pos];
      key += char('0' + int(e.kind));
      if (e.kind == ElementKind::kEnd) return;
      if (e.kind == ElementKind::kBytes) {
        key.append(reinterpret_cast<const char*>(g.byte_sets[e.value].words.data()), 32);
      } else {
        auto [it, added] = renumbered.emplace(e.value, uint32_t(renumbered.size()));
        if (added) queue.push_back(e.value);
        put32(it->second);
      }
    }
  };
  // Per leaf, its frames' positions from the top, then 0 for the real bottom or 1 for the rest.
  std::vector<std::vector<uint32_t>> chains;
  for (uint32_t i = 0; i < s.n_leaves; ++i) {
    std::vector<uint32_t>& chain = chains.emplace_back();
    uint32_t id = leaves_[s.first_leaf + i];
    for (; id != 0 && id != kOpenRest; id = nodes_[id].parent) chain.push_back(nodes_[id].pos);
    chain.push_back(id == 0 ? 0 : 1);
  }
  std::sort(chains.begin(), chains.end());
  key += s.accept ? 'A' : s.open ? 'O' : '-';
  for (const std::vector<uint32_t>& chain : chains) {
    for (size_t k = 0; k + 1 < chain.size(); ++k) put_rest(chain[k]);
    key += chain.back() == 0 ? 'Z' : 'U';
  }
  for (size_t q = 0; q < queue.size(); ++q) {
    const Rule& rule = g.rules[queue[q]];
    key += 'R';
    put32(rule.n_alts);
    for (uint32_t a = 0; a < rule.n_alts; ++a) put_rest(g.alt_starts[rule.first_alt + a]);
  }
  return key;
}

int32_t GrammarAutomaton::walk(int32_t state, std::string_view bytes) {
  for (char c : bytes) {
    if (state == kDead) return kDead;
    state = step(state, uint8_t(c));
  }
  return state;
}

}  // namespace deepinfer::grammar

namespace deepinfer::grammar {

namespace {
uint32_t saturating_add(uint32_t a, uint32_t b) {
  return a > GrammarAutomaton::kFar - b ? GrammarAutomaton::kFar : a + b;
}
}  // namespace

// Shortest derivations by fixpoint: a rule's length is the least over its alternatives of the
// sum of their elements' lengths (a byte set is 1), starting from kFar everywhere.
void GrammarAutomaton::compute_min_rest() {
  const Grammar& g = *grammar_;
  std::vector<uint32_t> rule_len(g.rules.size(), kFar);
  min_rest_.assign(g.elements.size(), kFar);
  // Passes alternate direction: rules refer to both earlier and later ids.
  for (bool changed = true, forward = true; changed; forward = !forward) {
    changed = false;
    for (size_t i = 0; i < g.rules.size(); ++i) {
      const size_t r = forward ? i : g.rules.size() - 1 - i;
      const Rule& rule = g.rules[r];
      for (uint32_t a = 0; a < rule.n_alts; ++a) {
        uint32_t end = g.alt_starts[rule.first_alt + a];
        while (g.elements[end].kind != ElementKind::kEnd) ++end;
        uint32_t rest = 0;
        min_rest_[end] = 0;
        for (uint32_t p = end; p-- > g.alt_starts[rule.first_alt + a];) {
          const Element e = g.elements[p];
          rest = saturating_add(rest, e.kind == ElementKind::kBytes ? 1 : rule_len[e.value]);
          min_rest_[p] = rest;
        }
        if (rest < rule_len[r]) {
          rule_len[r] = rest;
          changed = true;
        }
      }
    }
  }
}

uint32_t GrammarAutomaton::bytes_to_accept(int32_t state) const {
  const State& s = states_[size_t(state)];
  if (s.accept) return 0;
  uint32_t best = kFar;
  for (uint32_t i = 0; i < s.n_leaves; ++i) {
    uint32_t total = 0;
    for (uint32_t id = leaves_[s.first_leaf + i]; id != 0 && id != kOpenRest; id = nodes_[id].parent) {
      total = saturating_add(total, min_rest_[nodes_[id].pos]);
    }
    best = std::min(best, total);
  }
  return best;
}

}  // namespace deepinfer::grammar
