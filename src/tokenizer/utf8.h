// UTF-8 helpers shared by the tokenizer stages: validation, code point iteration, and the lossy
// conversion that turns arbitrary bytes into text the way Rust's String::from_utf8_lossy does
// (one U+FFFD per maximal invalid subpart, per Unicode's recommended practice).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace deepinfer::utf8 {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Byte offset of the first ill-formed sequence in `s` (overlong forms, surrogates and values above
// U+10FFFF are ill-formed), or std::string_view::npos when `s` is valid UTF-8.
size_t find_invalid(std::string_view s);

// Length in bytes of the character starting with lead byte `b` in valid UTF-8.
inline size_t char_length(uint8_t b) {
  if (b < 0x80) return 1;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  return 4;
}

// Decodes the code point at `s[i]` of valid UTF-8 and advances `i` past it.
inline char32_t next_code_point(std::string_view s, size_t& i) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + i;
  if (p[0] < 0x80) {
    i += 1;
    return p[0];
  }
  if (p[0] < 0xE0) {
    i += 2;
    return (char32_t(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
  }
  if (p[0] < 0xF0) {
    i += 3;
    return (char32_t(p[0] & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
  }
  i += 4;
  return (char32_t(p[0] & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) |
         (char32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
}

// Decodes the code point that ends just before `s[i]` in valid UTF-8 and moves `i` to its start.
char32_t previous_code_point(std::string_view s, size_t& i);

// Appends the UTF-8 encoding of code point `c` (a Unicode scalar value).
void append_code_point(std::string& out, char32_t c);

// Appends `bytes` as text: valid sequences are copied, each maximal invalid subpart becomes U+FFFD.
void append_lossy(std::string& out, std::string_view bytes);

// True when `s` ends with a U+FFFD character.
inline bool ends_with_replacement(std::string_view s) { return s.ends_with(kReplacementChar); }

}  // namespace deepinfer::utf8

namespace deepinfer::utf8 {

// Unicode White_Space (what Rust's char::is_whitespace and regex \s accept).
inline bool is_white_space(char32_t c) {
  if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
  if (c < 0x85) return false;
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace deepinfer::utf8
