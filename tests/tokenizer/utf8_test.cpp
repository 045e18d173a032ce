// UTF-8 validation and lossy conversion. Expected values: the Unicode Standard's recommended
// practice for U+FFFD substitution (one per maximal subpart, chapter 3.9), which Python's
// bytes.decode("utf-8", "replace") and Rust's String::from_utf8_lossy both follow; each case was
// checked against Python.
#include <gtest/gtest.h>

#include <string>

#include "tokenizer/utf8.h"

namespace deepinfer::utf8 {
namespace {

std::string lossy(std::string_view bytes) {
  std::string out;
  append_lossy(out, bytes);
  return out;
}

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8, FindsInvalidSequences) {
  EXPECT_EQ(find_invalid(""), std::string_view::npos);
  EXPECT_EQ(find_invalid("plain ascii text, longer than eight bytes"), std::string_view::npos);
  EXPECT_EQ(find_invalid("h\xC3\xA9llo \xE4\xBD\xA0 \xF0\x9F\x98\x80"), std::string_view::npos);
  EXPECT_EQ(find_invalid("abc\xC0\x80"), 3u);          // overlong
  EXPECT_EQ(find_invalid("\xED\xA0\x80"), 0u);         // surrogate
  EXPECT_EQ(find_invalid("ab\xF4\x90\x80\x80"), 2u);   // above U+10FFFF
  EXPECT_EQ(find_invalid("abcdefgh\xE4\xBD"), 8u);     // truncated at the end
  EXPECT_EQ(find_invalid("\x80"), 0u);                 // lone continuation byte
}

TEST(Utf8, LossyReplacesMaximalSubparts) {
  EXPECT_EQ(lossy("\xE0\x80"), kFffd + kFffd);
  EXPECT_EQ(lossy("\xED\xA0\x80"), kFffd + kFffd + kFffd);
  EXPECT_EQ(lossy("\xF0\x9F\x98"), kFffd);
  EXPECT_EQ(lossy("a\xFF" "b"), "a" + kFffd + "b");
  EXPECT_EQ(lossy("\xC0\x80"), kFffd + kFffd);
  EXPECT_EQ(lossy("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);
  EXPECT_EQ(lossy("\xF0\x9F\x98\x80\xE4"), "\xF0\x9F\x98\x80" + kFffd);
  EXPECT_EQ(lossy("\xE4\xBD"), kFffd);
  EXPECT_EQ(lossy("valid \xE4\xBD\xA0"), "valid \xE4\xBD\xA0");
}

TEST(Utf8, CodePointsRoundTrip) {
  for (char32_t c : {U'a', U'\u00E9', U'\u4F60', U'\U0001F600', U'\U0010FFFF'}) {
    std::string s;
    append_code_point(s, c);
    size_t i = 0;
    EXPECT_EQ(next_code_point(s, i), c);
    EXPECT_EQ(i, s.size());
    EXPECT_EQ(previous_code_point(s, i), c);
    EXPECT_EQ(i, 0u);
  }
}

TEST(Utf8, WhiteSpaceIsTheUnicodeProperty) {
  // Unicode's White_Space list (PropList.txt).
  for (char32_t c : {U'\t', U'\n', U'\v', U'\f', U'\r', U' ', U'\u0085', U'\u00A0', U'\u1680',
                     U'\u2000', U'\u200A', U'\u2028', U'\u2029', U'\u202F', U'\u205F', U'\u3000'}) {
    EXPECT_TRUE(is_white_space(c)) << uint32_t(c);
  }
  for (char32_t c : {U'a', U'\u200B', U'\u180E', U'\u001C', U'\uFEFF'}) {
    EXPECT_FALSE(is_white_space(c)) << uint32_t(c);
  }
}

}  // namespace
}  // namespace deepinfer::utf8
