// GrammarAutomaton: the byte-level matcher of a Grammar, a pushdown automaton whose
// configurations are built lazily and memoized, so that a byte step is usually one table load.
//
// A parse stack is a chain of frames; a frame is the position (in Grammar::elements) of the next
// element to match in one alternative. Stacks are hash-consed into nodes (position, parent), so
// equal stacks are equal ids. A state is the set of live stacks whose top is a byte element (the
// "leaves"), plus whether the input so far is a complete sentence; states are interned too, and
// each state's 256 transitions are filled in on first use (a dead byte maps to kDead).
// References in tail position replace their frame instead of pushing one, so repetitions run in
// constant stack depth and a regular grammar runs as a DFA built on the fly.
//
// Detached states: a state's parse stacks cut below their top frames, the rest replaced by an
// unknown rest (detach()). The cut is the parent of the deepest frame that every leaf's
// grandparent frame (or the leaf, when shallower) lies on, so that, e.g., inside a JSON string
// the character, its repetition and the closing quote are kept and what follows the string is
// not. Stepping a detached state is exact while no parse pops into that rest;
// a parse that does marks the state open(), where the real answer depends on the stack below.
// What a detached state does is fixed by frame_key(), a text naming only the grammar reachable
// from its leaves, so grammars with the same such structure share what is computed from it.
//
// Bounded: stack nodes, states and leaves per state are capped (Limits); passing a cap makes the
// step return kDead and status() fail with the reason. Transition tables are a cache with a byte
// budget, cleared when full. Not thread-safe: one automaton per GrammarMatcher.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "grammar/grammar.h"

namespace deepinfer::grammar {

struct AutomatonLimits {
  size_t max_stack_nodes = 1u << 22;
  size_t max_states = 1u << 20;
  size_t max_leaves_per_state = 4096;  // parses alive at once (ambiguity)
  size_t transition_cache_bytes = 64u << 20;
};

class GrammarAutomaton {
 public:
  static constexpr int32_t kDead = -1;

  GrammarAutomaton(std::shared_ptr<const Grammar> grammar, AutomatonLimits limits = {});

  int32_t initial_state() const { return initial_; }
  // The state after `byte` from `state` (not kDead), or kDead.
  int32_t step(int32_t state, uint8_t byte) {
    const int32_t t = table_of_[size_t(state)];
    if (t >= 0) {
      const int32_t next = tables_[size_t(t) * 256 + byte];
      if (next != kUnknown) return next;
    }
    return step_slow(state, byte);
  }
  // The state after all of `bytes`, or kDead.
  int32_t walk(int32_t state, std::string_view bytes);
  // Whether the bytes that led to `state` form a complete sentence of the grammar.
  bool accepts(int32_t state) const { return states_[size_t(state)].accept; }
  // Bytes that some live parse can take next; empty when the sentence cannot be extended.
  const ByteSet& next_bytes(int32_t state) const { return states_[size_t(state)].next; }
  // The fewest bytes that lead from `state` to an accepting state (0 when it accepts): over the
  // live stacks, the shortest text that completes every frame (from each rule's shortest
  // derivation, computed once per grammar). Saturates at kFar.
  static constexpr uint32_t kFar = UINT32_MAX;
  uint32_t bytes_to_accept(int32_t state) const;
  size_t n_states() const { return states_.size(); }
  // The detached state of `state` (not kDead): its stacks' top frames (above the cut) over the
  // unknown rest. kDead past a limit.
  int32_t detach(int32_t state);
  // Whether some parse of `state` (reached from a detached state) popped into the unknown rest.
  bool open(int32_t state) const { return states_[size_t(state)].open; }
  // A grammar-independent description of what `state` matches within its stacks: per leaf, each
  // frame's remaining elements down to the unknown rest (or the real bottom), then every rule
  // reachable from them, rules renumbered in order of discovery. Equal keys (of detached states) mean equal behaviour, whatever the grammars.
  std::string frame_key(int32_t state) const;
  const Status& status() const { return status_; }

 private:
  static constexpr int32_t kUnknown = -2;
  struct Node {
    uint32_t pos;
    uint32_t parent;
  };
  struct State {
    uint32_t first_leaf, n_leaves;  // into leaves_
    bool accept;
    bool open;
    ByteSet next;
  };
  struct KeyHash {
    size_t operator()(const std::vector<uint32_t>& v) const;
  };

  int32_t step_slow(int32_t state, uint8_t byte);
  // Adds to scratch_leaves_ the leaves reached from frame (pos, parent), setting scratch_accept_.
  bool expand(uint32_t pos, uint32_t parent);
  // nodes_[kOpenRest]: the unknown stack below a detached state's frames.
  static constexpr uint32_t kOpenRest = 1;
  // The node (pos, parent); UINT32_MAX past the node cap.
  uint32_t intern_node(uint32_t pos, uint32_t parent);
  int32_t intern_state();
  void fail(std::string message);
  void compute_min_rest();

  std::shared_ptr<const Grammar> grammar_;
  AutomatonLimits limits_;
  Status status_;
  std::vector<Node> nodes_;  // nodes_[0]: the empty stack
  std::unordered_map<uint64_t, uint32_t> node_ids_;
  std::vector<State> states_;
  std::vector<uint32_t> leaves_;
  std::unordered_map<std::vector<uint32_t>, int32_t, KeyHash> state_ids_;
  std::vector<int32_t> table_of_;  // per state: its table in tables_, or -1
  std::vector<int32_t> tables_;    // 256 transitions per table
  // Per element position: the fewest bytes that complete its alternative from there.
  std::vector<uint32_t> min_rest_;
  int32_t initial_ = kDead;
  // Scratch of one step.
  std::vector<uint32_t> scratch_leaves_;
  bool scratch_accept_ = false;
  bool scratch_open_ = false;
  std::vector<uint32_t> mark_;  // per node: the step that visited it
  uint32_t generation_ = 0;
  std::vector<uint32_t> work_;
};

}  // namespace deepinfer::grammar
