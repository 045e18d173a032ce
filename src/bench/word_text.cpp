#include "bench/word_text.h"

#include <array>
#include <cctype>

namespace deepinfer::bench {
namespace {

constexpr auto kWords = std::to_array<std::string_view>({
#include "bench/word_list.inc"
});

}  // namespace

std::string_view WordText::word(Rng& rng) {
  return kWords[static_cast<size_t>(rng.uniform_int(0, static_cast<int64_t>(kWords.size()) - 1))];
}

void WordText::append(std::string& out, int64_t n_tokens, Rng& rng) {
  // Sentences of about 12 words, with the odd comma: prose-like punctuation, one token per mark.
  for (int64_t left = n_tokens; left > 0;) {
    out += ' ';
    out += word(rng);
    --left;
    if (left < 2) continue;  // a mark needs a word after it: pieces end with a word
    const uint64_t r = rng.next() % 24;
    if (r < 2) {
      out += '.';
      --left;
    } else if (r == 2) {
      out += ',';
      --left;
    }
  }
}

std::string WordText::make(int64_t n_tokens, Rng& rng) {
  std::string out;
  out.reserve(static_cast<size_t>(n_tokens) * 8);
  append(out, n_tokens, rng);
  return out;
}

std::vector<std::string_view> WordText::split_tokens(std::string_view text) {
  auto is_word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  std::vector<std::string_view> tokens;
  for (size_t i = 0; i < text.size();) {
    if (std::isspace(static_cast<unsigned char>(text[i]))) {
      ++i;
    } else if (is_word(text[i])) {
      size_t j = i;
      while (j < text.size() && is_word(text[j])) ++j;
      tokens.push_back(text.substr(i, j - i));
      i = j;
    } else {
      tokens.push_back(text.substr(i++, 1));
    }
  }
  return tokens;
}

}  // namespace deepinfer::bench
