// WordText: prompt text of an exact token length, made of real words.
//
// Every piece of text it makes starts with a space and ends with a word: a run of " word" units,
// some followed by "." or ","; under the DeepSeek-V3 tokenizer each unit and each mark is exactly
// one token and no token spans two pieces, so pieces can be concatenated and their lengths add up (see
// bench/serving/make_word_list.py, which chose the words, and tests/bench/test_prompt_lengths.py).
// With another tokenizer lengths are close, not exact. Stateless; thread-safe.
#pragma once

#include "bench/distribution.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::bench {

class WordText {
 public:
  // Appends exactly n_tokens tokens of word text to out.
  static void append(std::string& out, int64_t n_tokens, Rng& rng);
  static std::string make(int64_t n_tokens, Rng& rng);
  // One random word (no leading space), e.g. for identifiers.
  static std::string_view word(Rng& rng);
  // The tokens of text made of these pieces: each run of letters, digits and '_' is one, and
  // each other non-space character is one. Exact for WordText output; an approximation for any
  // other text.
  static std::vector<std::string_view> split_tokens(std::string_view text);
  static int64_t count_tokens(std::string_view text) { return static_cast<int64_t>(split_tokens(text).size()); }
};

}  // namespace deepinfer::bench
