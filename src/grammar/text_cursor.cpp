#include "grammar/text_cursor.h"

namespace deepinfer::grammar {

bool TextCursor::next_code_point(char32_t& c) {
  const uint8_t b = uint8_t(peek());
  int n;
  if (b < 0x80) {
    c = b;
    n = 1;
  } else if (b >= 0xC2 && b < 0xE0) {
    c = b & 0x1F;
    n = 2;
  } else if (b >= 0xE0 && b < 0xF0) {
    c = b & 0x0F;
    n = 3;
  } else if (b >= 0xF0 && b < 0xF5) {
    c = b & 0x07;
    n = 4;
  } else {
    return false;
  }
  if (pos_ + size_t(n) > text_.size()) return false;
  for (int k = 1; k < n; ++k) {
    const uint8_t cb = uint8_t(text_[pos_ + size_t(k)]);
    if ((cb & 0xC0) != 0x80) return false;
    c = (c << 6) | (cb & 0x3F);
  }
  static constexpr char32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < kMin[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return false;
  pos_ += size_t(n);
  return true;
}

Status TextCursor::error(const std::string& message) const {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
    if (text_[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return Status::Error("line " + std::to_string(line) + " column " + std::to_string(column) + ": " +
                       message);
}

}  // namespace deepinfer::grammar
