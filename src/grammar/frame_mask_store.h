// FrameMaskStore: the part of a state's token mask that does not depend on the parse stack below
// the state's own frames, computed once per frame structure (GrammarAutomaton::frame_key) and
// shared by every grammar and schema over one vocabulary (TokenVocabulary::frame_masks()).
//
// A FrameMask splits the vocabulary for a detached state: `accepted` holds the tokens the frames
// take whole (allowed whatever the stack holds), `uncertain` the trie subtrees where some parse
// pops out of the frames (checked against the real stack per state); every other token is
// refused whatever the stack holds. End ids are never in it.
// Bounded by a byte budget (cleared when full); thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace deepinfer::grammar {

struct FrameMask {
  struct Uncertain {
    uint32_t node;       // trie node (TokenVocabulary::trie()) whose subtree depends on the stack
    std::string prefix;  // the bytes from the trie's root to that node's parent
  };
  std::vector<uint32_t> accepted;  // bitmask over the vocabulary
  std::vector<Uncertain> uncertain;
  size_t bytes() const;
};

class FrameMaskStore {
 public:
  explicit FrameMaskStore(size_t max_bytes = 256u << 20) : max_bytes_(max_bytes) {}
  // The mask stored under `key`, or null.
  std::shared_ptr<const FrameMask> find(const std::string& key);
  // Stores `mask` under `key` (keeping one already there) and returns what is stored.
  std::shared_ptr<const FrameMask> insert(const std::string& key, std::shared_ptr<const FrameMask> mask);
  size_t size();
  size_t hits();

 private:
  std::mutex mu_;
  size_t max_bytes_;
  size_t bytes_ = 0;
  size_t hits_ = 0;
  std::unordered_map<std::string, std::shared_ptr<const FrameMask>> masks_;
};

}  // namespace deepinfer::grammar
