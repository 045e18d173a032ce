// PreTokenizer: the "pre_tokenizer" of tokenizer.json, which cuts each stretch of normalized text
// into pieces that the model tokenizes independently. Supported: Sequence, Split (string or regex
// pattern; behaviors Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous; invert),
// ByteLevel (add_prefix_space, use_regex with the GPT-2 pattern), Digits, Metaspace (replacement,
// prepend_scheme, split), Whitespace, WhitespaceSplit, Punctuation, CharDelimiterSplit.
//
// A ByteLevel step that ends the chain leaves its pieces as raw bytes and sets
// Pieces::byte_level: the model reads each byte through the byte-level alphabet itself, which
// saves building the mapped strings. Empty pieces are dropped, as the library does.
// Immutable after construction; split() is thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/regex.h"

namespace deepinfer {

class PreTokenizer {
 public:
  struct Piece {
    std::string_view text;
    bool at_text_start;  // begins at offset 0 of the input (Metaspace prepend_scheme "first")
  };
  // The pieces of one stretch of text, plus storage for pieces that were rewritten. Reused across
  // calls to avoid allocation; views stay valid until the next clear().
  struct Pieces {
    std::vector<Piece> pieces;
    bool byte_level = false;  // pieces hold raw bytes standing for byte-level characters
    void clear() {
      pieces.clear();
      storage.clear();
      byte_level = false;
    }

   private:
    friend class PreTokenizer;
    std::string_view store(std::string s) { return storage.emplace_back(std::move(s)); }
    std::deque<std::string> storage;
    std::vector<Piece> scratch;
    std::vector<Regex::Match> matches;
  };

  // `config` is the "pre_tokenizer" value of tokenizer.json (null: the whole stretch is one piece).
  static Result<PreTokenizer> FromJson(const nlohmann::json& config);

  // Replaces out.pieces with the pieces of `text`; `at_text_start`: whether `text` begins at
  // offset 0 of the input.
  Status split(std::string_view text, bool at_text_start, Pieces& out) const;

 private:
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
  enum class Prepend { kFirst, kNever, kAlways };
  enum class Kind { kSplit, kByteLevel, kMetaspace };
  struct Step {
    Kind kind = Kind::kSplit;
    std::shared_ptr<const Regex> regex;  // the split pattern (null: ByteLevel without regex)
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;  // ByteLevel
    bool map_bytes_now = false;     // ByteLevel that is not last: write mapped text at once
    std::string replacement;        // Metaspace
    Prepend prepend = Prepend::kAlways;
  };

  static Status add_steps(const nlohmann::json& config, const std::string& where,
                          std::vector<Step>& steps);
  static Result<Behavior> parse_behavior(const nlohmann::json& config, const std::string& where,
                                         Behavior fallback);
  // Splits every piece of `in` by `step.regex` with the step's behavior, appending to `out`.
  static Status split_pieces(const Step& step, Pieces& state, const std::vector<Piece>& in,
                             std::vector<Piece>& out);

  std::vector<Step> steps_;
};

}  // namespace deepinfer
