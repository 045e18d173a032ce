// Normalizer: the "normalizer" of tokenizer.json, applied to each stretch of input text between
// added tokens before pre-tokenization. Supported: Sequence, NFC, NFD, NFKC, NFKD, Lowercase,
// Prepend, Replace (string or regex), Strip, with the library's own Unicode data
// (unicode_tables.h).
// Immutable after construction; apply() is thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/regex.h"

namespace deepinfer {

class Normalizer {
 public:
  // `config` is the "normalizer" value of tokenizer.json (null means no normalization).
  static Result<Normalizer> FromJson(const nlohmann::json& config);

  bool empty() const { return steps_.empty(); }
  // Rewrites `text` (valid UTF-8) in place.
  Status apply(std::string& text) const;

 private:
  enum class Kind { kNfc, kNfd, kNfkc, kNfkd, kLowercase, kPrepend, kReplace, kStrip };
  struct Step {
    Kind kind;
    std::string content;                  // Prepend: the prefix; Replace: the replacement
    std::shared_ptr<const Regex> pattern;  // Replace
    bool strip_left = false, strip_right = false;  // Strip
  };
  static Status add_steps(const nlohmann::json& config, const std::string& where,
                          std::vector<Step>& steps);
  std::vector<Step> steps_;
};

}  // namespace deepinfer
