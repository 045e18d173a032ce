// Regex: Oniguruma semantics on PCRE2. Expected values: the `tokenizers` library (0.22.1) run on
// the same patterns through pre_tokenizers.Split(Regex(...), "isolated").pre_tokenize_str, which
// shows the matches (checked by hand when these tests were written).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/regex.h"

namespace deepinfer {
namespace {

std::vector<std::pair<size_t, size_t>> matches(std::string_view pattern, std::string_view text) {
  auto regex = Regex::FromOniguruma(pattern);
  EXPECT_TRUE(regex.ok()) << regex.status().message();
  std::vector<Regex::Match> found;
  EXPECT_TRUE((*regex)->find_all(text, found).ok());
  std::vector<std::pair<size_t, size_t>> out;
  for (const auto& m : found) out.emplace_back(m.start, m.end);
  return out;
}

using Spans = std::vector<std::pair<size_t, size_t>>;

TEST(Regex, WhitespaceIsUnicodeWhiteSpace) {
  // The library splits "a\u0085b" and "a\u2028b" at the middle character, not "a\u200Bb".
  EXPECT_EQ(matches(R"(\s)", "a\xC2\x85" "b"), (Spans{{1, 3}}));
  EXPECT_EQ(matches(R"(\s)", "a\xE2\x80\xA8" "b"), (Spans{{1, 4}}));
  EXPECT_TRUE(matches(R"(\s)", "a\xE2\x80\x8B" "b").empty());
  EXPECT_EQ(matches(R"([^\S\n]+)", "a \t\nb"), (Spans{{1, 3}}));
}

TEST(Regex, WordAndDigitClasses) {
  // \w takes marks and all numbers ("\u00B2", "\u2160"); \d only decimal digits.
  EXPECT_EQ(matches(R"(\w)", "-\xC2\xB2-"), (Spans{{1, 3}}));
  EXPECT_EQ(matches(R"(\w)", "-\xE2\x85\xA0-"), (Spans{{1, 4}}));
  EXPECT_EQ(matches(R"(\w)", "-\xCC\x81-"), (Spans{{1, 3}}));
  EXPECT_EQ(matches(R"(\d)", "a\xD9\xA0\xC2\xB2" "b"), (Spans{{1, 3}}));
  EXPECT_EQ(matches(R"(\h+)", "ab g\t"), (Spans{{0, 2}}));  // Ruby syntax: \h is a hex digit
}

TEST(Regex, AnchorsMatchAtLineStarts) {
  EXPECT_EQ(matches(R"(^a)", "ab\nab"), (Spans{{0, 1}, {3, 4}}));
}

TEST(Regex, EmptyMatchesFollowOnigurumaIteration) {
  // An empty match right after the previous match is skipped.
  EXPECT_EQ(matches(R"(x*)", "abxxc"), (Spans{{0, 0}, {1, 1}, {2, 4}, {5, 5}}));
}

TEST(Regex, LookAheadAndPropertiesOfTheGpt2Pattern) {
  const char* gpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
  EXPECT_EQ(matches(gpt2, "Hello  world's 42!"),
            (Spans{{0, 5}, {5, 6}, {6, 12}, {12, 14}, {14, 17}, {17, 18}}));
}

TEST(Regex, LiteralPatternsEscapeEverything) {
  auto regex = Regex::FromLiteral("a.b*(c)");
  ASSERT_TRUE(regex.ok());
  std::vector<Regex::Match> found;
  ASSERT_TRUE((*regex)->find_all("xa.b*(c)a-bb(c)", found).ok());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].start, 1u);
}

TEST(Regex, CategoriesFollowTheLibrarysUnicodeVersion) {
  // The library classifies U+1FA77 (pink heart, Unicode 15) and U+1FAE9 (Unicode 16) as symbols
  // and U+32037 (CJK extension H) as a letter; PCRE2's own tables are older.
  EXPECT_EQ(matches(R"([\p{P}\p{S}]+)", "a\U0001FA77b\U0001FAE9c"), (Spans{{1, 5}, {6, 10}}));
  EXPECT_EQ(matches(R"(\p{L}+)", "1\U00032037 2"), (Spans{{1, 5}}));
  EXPECT_EQ(matches(R"([^\s\P{L}]+)", "ab1 c"), (Spans{{0, 2}, {4, 5}}));  // \P inside a class
  EXPECT_EQ(matches(R"(\p{^N}+)", "ab12c"), (Spans{{0, 2}, {4, 5}}));
  // U+1C89 (Unicode 16) is an uppercase letter and a word character for the library.
  EXPECT_EQ(matches(R"(\p{Lu})", "aA\u1C89b"), (Spans{{1, 2}, {2, 5}}));
  EXPECT_EQ(matches(R"(\w+)", "-a\u1C89\u0301_2-"), (Spans{{1, 9}}));
}

TEST(Regex, TranslationLeavesOtherSyntaxAlone) {
  EXPECT_EQ(translate_oniguruma_pattern(R"([]a]\S)"), R"([\]a]\P{White_Space})");
  EXPECT_EQ(translate_oniguruma_pattern(R"((?i:'s)|\p{Han}+|[[:alpha:]])"), R"((?i:'s)|\p{Han}+|[[:alpha:]])");
}

TEST(Regex, BadPatternIsAnError) {
  auto regex = Regex::FromOniguruma("(unclosed");
  ASSERT_FALSE(regex.ok());
  EXPECT_NE(regex.status().message().find("(unclosed"), std::string::npos);
}

TEST(Regex, MegabyteOfWhitespaceMatchesWithoutStackTrouble) {
  const std::string spaces(1 << 20, ' ');
  EXPECT_EQ(matches(R"(\s+(?!\S)|\s+)", spaces), (Spans{{0, spaces.size()}}));
  const std::string mixed = std::string(1 << 20, ' ') + "x";
  EXPECT_EQ(matches(R"(\s*[\r\n]+|\s+(?!\S)|\s+)", mixed), (Spans{{0, (1u << 20) - 1}, {(1u << 20) - 1, 1u << 20}}));
}

}  // namespace
}  // namespace deepinfer
