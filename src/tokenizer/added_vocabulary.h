// AddedVocabulary: the "added_tokens" of tokenizer.json, matched in the input before the model
// sees it, exactly as the library does. Tokens with normalized=false are found in the raw text;
// the text between them is normalized and then searched for tokens with normalized=true (whose
// contents are normalized the same way). Each search is leftmost-longest and non-overlapping; a
// single_word token only counts between non-word characters, lstrip/rstrip tokens swallow the
// whitespace beside them.
//
// Ids follow the library's rule: a token already in the model's vocabulary keeps that id, any
// other gets the next id after the model vocabulary (in file order).
// Immutable after construction; split() is thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/status.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/normalizer.h"

namespace deepinfer {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
};

class AddedVocabulary {
 public:
  // A stretch of the input: an added token, or text for the next stage.
  struct Segment {
    size_t start, end;  // byte offsets into the searched text
    int32_t id;         // the added token's id, or -1 for plain text
  };

  // `config` is the "added_tokens" list of tokenizer.json (null: none).
  static Result<AddedVocabulary> FromJson(const nlohmann::json& config, const BpeModel& model,
                                          const Normalizer& normalizer);

  // Splits `text` (valid UTF-8) by the tokens with normalized == `normalized`, appending segments
  // in order. Segments may be empty or, after rstrip, overlap, as in the library; callers skip
  // empty plain segments.
  void split(std::string_view text, bool normalized, std::vector<Segment>& out) const;

  bool empty() const { return tokens_.empty(); }
  std::optional<int32_t> token_to_id(std::string_view content) const;
  const AddedToken* find(int32_t id) const;
  // Whether `content` is the content of a special added token.
  bool is_special(std::string_view content) const;
  // Distinct contents that are not in the model vocabulary.
  size_t count_not_in(const BpeModel& model) const;

 private:
  // A byte trie over token contents for leftmost-longest search.
  class Trie {
   public:
    void add(std::string_view key, int32_t id);
    bool empty() const { return nodes_.size() <= 1; }
    // Longest key that starts at text[pos]: its length and id, or {0, -1}.
    std::pair<size_t, int32_t> longest_at(std::string_view text, size_t pos) const;
    bool may_start(uint8_t b) const { return first_bytes_[b]; }

   private:
    struct Node {
      std::unordered_map<uint8_t, uint32_t> children;
      int32_t id = -1;
    };
    std::vector<Node> nodes_{Node{}};
    bool first_bytes_[256] = {};
  };

  std::vector<AddedToken> tokens_;                       // in file order, one per id
  std::unordered_map<int32_t, size_t> index_by_id_;      // id -> tokens_ index
  std::unordered_map<std::string, int32_t> id_by_content_;
  std::unordered_set<std::string> special_contents_;
  Trie raw_trie_, normalized_trie_;
};

}  // namespace deepinfer
