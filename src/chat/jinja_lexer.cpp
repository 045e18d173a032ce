#include "chat/jinja_lexer.h"

#include <cctype>
#include <cstring>
#include <optional>

#include "chat/jinja_error.h"
#include "chat/py_string.h"

namespace deepinfer::chat::jinja {
namespace {

// Most tokens in one {{ }} or {% %} tag. Operator chains parse into trees as deep as they are
// long, and rendering recurses through them: this bounds the native stack a template can use.
// Real chat templates stay under a hundred.
constexpr size_t kMaxTagTokens = 2048;

std::string normalize_source(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Python's str.rstrip() / "whitespace only" on data text.
std::string rstrip_all(std::string_view s) { return py::strip(s, std::nullopt, false, true); }
bool all_whitespace(std::string_view s) {
  if (s.empty()) return false;
  for (char32_t c : py::decode_utf8(s)) {
    if (!py::is_space(c)) return false;
  }
  return true;
}

// Python string-literal escapes, as Jinja applies them to string tokens.
std::string unescape(std::string_view s, int line) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      out.push_back(s[i]);
      continue;
    }
    const char e = s[++i];
    auto hex = [&](size_t n) -> char32_t {
      if (i + n >= s.size()) {
        throw TemplateSyntaxError("line " + std::to_string(line) + ": truncated escape in string literal");
      }
      char32_t v = 0;
      for (size_t k = 1; k <= n; ++k) {
        const char h = s[i + k];
        if (!std::isxdigit(static_cast<unsigned char>(h))) {
          throw TemplateSyntaxError("line " + std::to_string(line) + ": bad escape in string literal");
        }
        v = v * 16 + static_cast<char32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0'
                                                                                        : (std::tolower(h) - 'a' + 10));
      }
      i += n;
      return v;
    };
    switch (e) {
      case '\n': break;
      case '\\': out.push_back('\\'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case 'v': out.push_back('\v'); break;
      case 'x': py::append_utf8(out, hex(2)); break;
      case 'u': py::append_utf8(out, hex(4)); break;
      case 'U': py::append_utf8(out, hex(8)); break;
      default:
        if (e >= '0' && e <= '7') {
          char32_t v = 0;
          size_t k = 0;
          while (k < 3 && i < s.size() && s[i] >= '0' && s[i] <= '7') v = v * 8 + (s[i++] - '0'), ++k;
          --i;
          py::append_utf8(out, v);
        } else {
          out.push_back('\\');  // unknown escapes stay as written
          out.push_back(e);
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(normalize_source(source)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) lex_root();
    emit(Token::Type::kEnd, "");
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw TemplateSyntaxError("line " + std::to_string(line_) + ": " + what);
  }

  void emit(Token::Type type, std::string value) { tokens_.push_back({type, std::move(value), line_}); }

  void advance_to(size_t pos) {
    for (size_t i = pos_; i < pos && i < src_.size(); ++i) line_ += src_[i] == '\n';
    pos_ = pos;
  }

  // Text before a tag, with `-` (strip all whitespace) or lstrip_blocks applied.
  void emit_text(std::string text, char modifier, bool lstrip_eligible) {
    if (modifier == '-') {
      text = rstrip_all(text);
    } else if (modifier != '+' && lstrip_eligible) {
      const size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
      if ((l_pos > 0 || line_starting_) && all_whitespace(std::string_view(text).substr(l_pos))) {
        text.resize(l_pos);
      }
    }
    if (!text.empty()) emit(Token::Type::kData, std::move(text));
  }

  // After a closing `-%}`-style marker: skip whitespace; after a plain block end: one newline.
  void after_tag_end(char modifier, bool trim_newline) {
    if (modifier == '-') {
      size_t p = pos_;
      while (p < src_.size() && is_ascii_space(src_[p])) ++p;
      advance_to(p);
    } else if (modifier != '+' && trim_newline && pos_ < src_.size() && src_[pos_] == '\n') {
      advance_to(pos_ + 1);
    }
  }

  void lex_root() {
    size_t start = pos_;
    size_t tag = std::string::npos;
    for (size_t p = src_.find('{', start); p != std::string::npos; p = src_.find('{', p + 1)) {
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) {
        tag = p;
        break;
      }
    }
    if (tag == std::string::npos) {
      emit(Token::Type::kData, src_.substr(start));
      advance_to(src_.size());
      return;
    }
    const char kind = src_[tag + 1];
    const char modifier = (tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+')) ? src_[tag + 2] : 0;
    std::string text = src_.substr(start, tag - start);
    const size_t body = tag + 2 + (modifier ? 1 : 0);

    if (kind == '%' && is_raw_begin(body)) {
      emit_text(std::move(text), modifier, true);
      advance_to(tag);
      lex_raw(body);
      return;
    }
    emit_text(std::move(text), modifier, kind != '{');
    advance_to(body);
    line_starting_ = false;
    if (kind == '#') {
      lex_comment();
    } else {
      lex_tag(kind == '%');
    }
  }

  // `{% raw %}` at `body` (just after `{%` and its modifier)?
  bool is_raw_begin(size_t body) const {
    size_t p = body;
    while (p < src_.size() && is_ascii_space(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    if (p < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[p])) || src_[p] == '_')) return false;
    while (p < src_.size() && is_ascii_space(src_[p])) ++p;
    return src_.compare(p, 2, "%}") == 0 || src_.compare(p, 3, "-%}") == 0;
  }

  void lex_raw(size_t body) {
    size_t p = src_.find("%}", body);
    const char open_mod = src_[p - 1] == '-' ? '-' : 0;
    advance_to(p + 2);
    after_tag_end(open_mod, true);
    // Find `{%[-+]? endraw [-+]?%}`.
    for (size_t q = src_.find("{%", pos_); q != std::string::npos; q = src_.find("{%", q + 2)) {
      size_t r = q + 2;
      char mod = 0;
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) mod = src_[r++];
      while (r < src_.size() && is_ascii_space(src_[r])) ++r;
      if (src_.compare(r, 6, "endraw") != 0) continue;
      r += 6;
      while (r < src_.size() && is_ascii_space(src_[r])) ++r;
      char end_mod = 0;
      if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) end_mod = src_[r++];
      if (src_.compare(r, 2, "%}") != 0) continue;
      std::string text = src_.substr(pos_, q - pos_);
      if (mod == '-') text = rstrip_all(text);
      if (!text.empty()) emit(Token::Type::kData, std::move(text));
      advance_to(r + 2);
      after_tag_end(end_mod, true);
      line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
      return;
    }
    fail("missing {% endraw %}");
  }

  void lex_comment() {
    size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) fail("missing end of comment tag");
    const char mod = (end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+')) ? src_[end - 1] : 0;
    advance_to(end + 2);
    after_tag_end(mod, true);
    line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
  }

  void lex_tag(bool block) {
    emit(block ? Token::Type::kBlockBegin : Token::Type::kVariableBegin, "");
    const size_t first_token = tokens_.size();
    const char close = block ? '%' : '}';
    std::vector<char> balance;
    while (true) {
      if (pos_ >= src_.size()) fail(block ? "unterminated {% tag" : "unterminated {{ expression");
      if (balance.empty()) {
        char mod = 0;
        size_t p = pos_;
        if (src_[p] == '-' || (block && src_[p] == '+')) mod = src_[p++];
        if (p + 1 < src_.size() && src_[p] == close && src_[p + 1] == '}') {
          advance_to(p + 2);
          emit(block ? Token::Type::kBlockEnd : Token::Type::kVariableEnd, "");
          after_tag_end(mod, block);
          line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
          return;
        }
      }
      if (tokens_.size() - first_token > kMaxTagTokens) fail("tag longer than 2048 tokens");
      const char c = src_[pos_];
      if (is_ascii_space(c)) {
        size_t p = pos_;
        while (p < src_.size() && is_ascii_space(src_[p])) ++p;
        advance_to(p);
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c))) {
        lex_number();
        continue;
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t p = pos_;
        while (p < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[p])) || src_[p] == '_')) ++p;
        emit(Token::Type::kName, src_.substr(pos_, p - pos_));
        advance_to(p);
        continue;
      }
      if (c == '\'' || c == '"') {
        lex_string(c);
        continue;
      }
      lex_operator(balance);
    }
  }

  void lex_number() {
    auto digits = [&](size_t p) {
      size_t q = p;
      while (q < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[q])) ||
                                 (src_[q] == '_' && q > p && q + 1 < src_.size() &&
                                  std::isdigit(static_cast<unsigned char>(src_[q + 1]))))) {
        ++q;
      }
      return q;
    };
    const size_t start = pos_;
    if (src_[start] == '0' && start + 1 < src_.size() && std::strchr("xXoObB", src_[start + 1])) {
      size_t p = start + 2;
      while (p < src_.size() && (std::isxdigit(static_cast<unsigned char>(src_[p])) || src_[p] == '_')) ++p;
      emit(Token::Type::kInteger, src_.substr(start, p - start));
      advance_to(p);
      return;
    }
    size_t p = digits(start);
    bool is_float = false;
    const bool after_dot = start > 0 && src_[start - 1] == '.';
    if (!after_dot) {
      if (p + 1 < src_.size() && src_[p] == '.' && std::isdigit(static_cast<unsigned char>(src_[p + 1]))) {
        p = digits(p + 1);
        is_float = true;
      }
      if (p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
        size_t q = p + 1;
        if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
        if (q < src_.size() && std::isdigit(static_cast<unsigned char>(src_[q]))) {
          p = digits(q);
          is_float = true;
        }
      }
    }
    emit(is_float ? Token::Type::kFloat : Token::Type::kInteger, src_.substr(start, p - start));
    advance_to(p);
  }

  void lex_string(char quote) {
    size_t p = pos_ + 1;
    while (p < src_.size() && src_[p] != quote) p += src_[p] == '\\' ? 2 : 1;
    if (p >= src_.size()) fail("unterminated string literal");
    const int line = line_;
    emit(Token::Type::kString, unescape(std::string_view(src_).substr(pos_ + 1, p - pos_ - 1), line));
    advance_to(p + 1);
  }

  void lex_operator(std::vector<char>& balance) {
    static const char* kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwo) {
      if (src_.compare(pos_, 2, op) == 0) {
        emit(Token::Type::kOperator, op);
        advance_to(pos_ + 2);
        return;
      }
    }
    const char c = src_[pos_];
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
      fail(std::string("unexpected character '") + c + "'");
    }
    if (c == '(' || c == '[' || c == '{') {
      balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty() || balance.back() != c) fail(std::string("unexpected '") + c + "'");
      balance.pop_back();
    }
    emit(Token::Type::kOperator, std::string(1, c));
    advance_to(pos_ + 1);
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace deepinfer::chat::jinja
