// TextCursor: a position in grammar or regex text, with the line/column error messages name.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace deepinfer::grammar {

class TextCursor {
 public:
  explicit TextCursor(std::string_view text) : text_(text) {}
  bool done() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  char next() { return text_[pos_++]; }
  bool consume(std::string_view s) {
    if (text_.substr(pos_, s.size()) != s) return false;
    pos_ += s.size();
    return true;
  }
  size_t pos() const { return pos_; }
  void set_pos(size_t p) { pos_ = p; }
  std::string_view rest() const { return text_.substr(pos_); }
  // The code point starting here (UTF-8); invalid UTF-8 yields false.
  bool next_code_point(char32_t& c);
  // "line L column C: message" (1-based; the column counts bytes).
  Status error(const std::string& message) const;

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace deepinfer::grammar
