// Unicode data and normalization as the `tokenizers` library (0.22.1) has them. Expected values
// were printed by the library: normalizers.NFKD/NFC/NFD/NFKC/Lowercase().normalize_str and
// pre_tokenizers.Digits/Punctuation on the same strings.
#include <gtest/gtest.h>

#include <string>

#include "tokenizer/unicode_normalization.h"
#include "tokenizer/unicode_tables.h"

namespace deepinfer::unicode {
namespace {

std::string normalized(std::string text, NormalForm form) {
  normalize(text, form);
  return text;
}

TEST(UnicodeNormalization, MatchesTheLibrary) {
  // The library's data has no decomposition for U+32FF (square era name Reiwa).
  EXPECT_EQ(normalized("\u32FF", NormalForm::kNfkd), "\u32FF");
  EXPECT_EQ(normalized("e\u0301\u1100\u1161\u11A8a\u0301\u0327", NormalForm::kNfc), "\u00E9\uAC01\u00E1\u0327");
  EXPECT_EQ(normalized("\u1E69\u00C5\uAC01", NormalForm::kNfd),
            "s\u0323\u0307A\u030A\u1100\u1161\u11A8");
  EXPECT_EQ(normalized("\uFB01\u2460\uFF21\u1E9B\u0323", NormalForm::kNfkc), "fi1A\u1E69");
  EXPECT_EQ(normalized("plain ascii", NormalForm::kNfkc), "plain ascii");
}

TEST(UnicodeTables, CharacterSets) {
  EXPECT_TRUE(contains(numeric(), U'\u00B2'));      // No
  EXPECT_TRUE(contains(numeric(), U'\u2160'));      // Nl
  EXPECT_FALSE(contains(numeric(), U'a'));
  EXPECT_TRUE(contains(punctuation(), U'$'));       // ASCII punctuation, though a symbol
  EXPECT_TRUE(contains(punctuation(), U'\u3001'));
  EXPECT_TRUE(contains(rust_word_chars(), U'\u0301'));
  EXPECT_FALSE(contains(rust_word_chars(), U'-'));
  EXPECT_STREQ(lowercase(U'\u0130'), "i\u0307");    // full mapping, no context
  EXPECT_STREQ(lowercase(U'\u03A3'), "\u03C3");
  EXPECT_EQ(lowercase(U'a'), nullptr);
  EXPECT_EQ(complement(std::vector<CodePointRange>{{0, 0x10FFFF}}).size(), 0u);
  EXPECT_EQ(complement(std::vector<CodePointRange>{{0x41, 0x5A}}).size(), 3u);  // surrogates left out
  EXPECT_FALSE(category("Xy").has_value());
  EXPECT_TRUE(contains(*category("L&"), U'A'));
  EXPECT_FALSE(contains(*category("L&"), U'\u4E00'));
}

}  // namespace
}  // namespace deepinfer::unicode
