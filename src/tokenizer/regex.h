// Regex: a PCRE2 pattern (UTF mode, JIT when available) that reproduces how the Hugging Face
// tokenizers library runs the patterns of tokenizer.json, which it compiles with Oniguruma's Ruby
// syntax. Oniguruma-specific meanings are translated before compiling: \s and \S are Unicode
// White_Space, \d is \p{Nd}, \w is [\p{L}\p{M}\p{N}\p{Pc}], \h is a hex digit, ^ and $ match at
// line boundaries; general categories (\p{L}, \P{N}, \p{^P}, and those in \d and \w) get the
// library's members (unicode_tables.h): PCRE2's \p{..} plus what its older tables lack, or every
// range written out. Matching follows Oniguruma's find_iter: left to right, non-overlapping, an
// empty match directly after the previous match is skipped.
//
// Thread safety: a compiled Regex is immutable; find_all may run on many threads at once (match
// scratch space is per thread).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace deepinfer {

class Regex {
 public:
  struct Match {
    size_t start;  // byte offsets into the searched text
    size_t end;
  };

  // A pattern in Oniguruma (Ruby) syntax, as tokenizer.json's {"Regex": ...} holds.
  static Result<std::shared_ptr<const Regex>> FromOniguruma(std::string_view pattern);
  // A pattern that matches `text` literally, as tokenizer.json's {"String": ...} means.
  static Result<std::shared_ptr<const Regex>> FromLiteral(std::string_view text);
  // A pattern already in PCRE2 syntax (no translation).
  static Result<std::shared_ptr<const Regex>> FromPcre2(std::string_view pattern);

  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Replaces `out` with every match in `text`, which must be valid UTF-8. Fails only when PCRE2
  // gives up (resource limits), with a message naming the pattern.
  Status find_all(std::string_view text, std::vector<Match>& out) const;

 private:
  Regex() = default;
  std::string pattern_;      // the PCRE2 pattern as compiled
  void* code_ = nullptr;     // pcre2_code_8*
  bool jit_ = false;
};

// The Oniguruma-to-PCRE2 translation that FromOniguruma applies (exposed for tests).
std::string translate_oniguruma_pattern(std::string_view pattern);

}  // namespace deepinfer
