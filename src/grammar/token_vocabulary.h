// TokenVocabulary: each token id's bytes, as the model's output text is made of them, and a
// byte trie over all tokens; built once per tokenizer and shared (immutable) by every matcher.
//
// Tokens with no bytes (special tokens, ids without a token) are never allowed by a grammar;
// the end ids (EOS) are allowed exactly where the grammar accepts. The vocabulary also carries
// the frame masks every grammar over it shares (FrameMaskStore; the only mutable part,
// thread-safe).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "grammar/byte_set.h"
#include "grammar/frame_mask_store.h"

namespace deepinfer {
class Tokenizer;
}

namespace deepinfer::grammar {

class TokenVocabulary {
 public:
  // A trie node in preorder: the node's byte, its depth (1 for a first byte), the index one past
  // its subtree, and the tokens whose bytes end here (node_tokens()[first_token, +n_tokens)); the
  // tokens of a subtree are contiguous in node_tokens(), from its root's first_token.
  struct TrieNode {
    uint8_t byte;
    uint16_t depth;
    uint32_t subtree_end;
    uint32_t first_token;
    uint32_t n_tokens;
  };

  // token_bytes[id] is token id's bytes; end_ids are the ids that end generation.
  TokenVocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> end_ids);
  // Every id of `tokenizer`: special tokens have no bytes; a byte-level token (GPT-2 alphabet)
  // maps back to its bytes; any other token is its decoded text. End ids: eos_token_ids().
  static Result<TokenVocabulary> FromTokenizer(const Tokenizer& tokenizer);

  size_t size() const { return bytes_.size(); }
  // uint32 words of a bitmask over the vocabulary (bit id % 32 of word id / 32).
  size_t bitmask_words() const { return (bytes_.size() + 31) / 32; }
  const std::string& bytes(int32_t id) const { return bytes_[size_t(id)]; }
  const std::vector<int32_t>& end_ids() const { return end_ids_; }
  bool is_end(int32_t id) const;
  const std::vector<TrieNode>& trie() const { return trie_; }
  const std::vector<int32_t>& node_tokens() const { return node_tokens_; }
  // Every byte of the subtree of trie node i (its own byte included); the tokens of that subtree
  // are node_tokens()[trie()[i].first_token, subtree_tokens_end(i)).
  const ByteSet& subtree_bytes(size_t i) const { return subtree_bytes_[i]; }
  uint32_t subtree_tokens_end(size_t i) const {
    const uint32_t end = trie_[i].subtree_end;
    return end < trie_.size() ? trie_[end].first_token : uint32_t(node_tokens_.size());
  }
  size_t max_token_bytes() const { return max_token_bytes_; }
  FrameMaskStore& frame_masks() const { return *frame_masks_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> end_ids_;
  std::vector<TrieNode> trie_;
  std::vector<int32_t> node_tokens_;
  std::vector<ByteSet> subtree_bytes_;
  size_t max_token_bytes_ = 0;
  std::shared_ptr<FrameMaskStore> frame_masks_ = std::make_shared<FrameMaskStore>();
};

}  // namespace deepinfer::grammar
