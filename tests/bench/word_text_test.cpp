#include "bench/word_text.h"

#include <gtest/gtest.h>

#include <cctype>

namespace deepinfer::bench {
namespace {

TEST(WordTextTest, MakesExactlyTheTokensAsked) {
  Rng rng(11);
  for (int64_t n : {1, 2, 3, 17, 512, 4097}) {
    const std::string text = WordText::make(n, rng);
    EXPECT_EQ(WordText::count_tokens(text), n);
    EXPECT_EQ(text.front(), ' ');
    EXPECT_TRUE(std::isalpha(static_cast<unsigned char>(text.back())));  // ends with a word
  }
  EXPECT_EQ(WordText::make(0, rng), "");
}

TEST(WordTextTest, PiecesConcatenateAdditively) {
  Rng rng(12);
  std::string text = WordText::make(100, rng);
  WordText::append(text, 23, rng);
  EXPECT_EQ(WordText::count_tokens(text), 123);
}

TEST(WordTextTest, IsDeterministicGivenTheSeed) {
  Rng a(5), b(5), c(6);
  const std::string ta = WordText::make(64, a);
  EXPECT_EQ(ta, WordText::make(64, b));
  EXPECT_NE(ta, WordText::make(64, c));
}

TEST(WordTextTest, SplitsWordsAndMarks) {
  EXPECT_EQ(WordText::split_tokens(" alpha beta. gamma,delta_2 :"),
            (std::vector<std::string_view>{"alpha", "beta", ".", "gamma", ",", "delta_2", ":"}));
}

}  // namespace
}  // namespace deepinfer::bench
