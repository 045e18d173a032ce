#include "chat/py_string.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace deepinfer::chat::py {
namespace {

// Invalid bytes decode to U+DC80..U+DCFF and encode back to the same byte (Python's
// surrogateescape), so decoding and re-encoding never changes a string.
constexpr char32_t kEscapedByteBase = 0xDC00;

bool in_set(char32_t cp, std::u32string_view set) { return set.find(cp) != std::u32string_view::npos; }

char32_t ascii_upper(char32_t c) { return (c >= 'a' && c <= 'z') ? c - 32 : c; }
char32_t ascii_lower(char32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }
bool is_cased_letter(char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80; }

bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
         c == 0x2028 || c == 0x2029;
}

// Code points that CPython's repr() escapes: controls, separators, format characters,
// private use and unpaired surrogates (an approximation of str.isprintable()).
bool is_printable(char32_t c) {
  if (c < 0x20 || c == 0x7F) return false;
  if (c < 0x7F) return true;
  if (c <= 0xA0 || c == 0xAD || c == 0x1680 || c == 0x180E) return false;
  if (c >= 0x2000 && c <= 0x200F) return false;
  if (c >= 0x2028 && c <= 0x202F) return false;
  if (c >= 0x205F && c <= 0x206F) return false;
  if (c == 0x3000 || c == 0xFEFF) return false;
  if (c >= 0xD800 && c <= 0xF8FF) return false;
  if (c >= 0xFFF9 && c <= 0xFFFB) return false;
  if (c >= 0xF0000) return false;
  return true;
}

}  // namespace

std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    int len = 0;
    char32_t cp = 0;
    if (b0 < 0x80) {
      len = 1, cp = b0;
    } else if ((b0 & 0xE0) == 0xC0 && b0 >= 0xC2) {
      len = 2, cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
      len = 3, cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0 && b0 <= 0xF4) {
      len = 4, cp = b0 & 0x07;
    }
    bool valid = len > 0 && i + len <= s.size();
    for (int k = 1; valid && k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) valid = false;
      cp = (cp << 6) | (b & 0x3F);
    }
    if (valid && len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) valid = false;
    if (valid && len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) valid = false;
    if (!valid) {
      out.push_back(kEscapedByteBase + b0);
      i += 1;
    } else {
      out.push_back(cp);
      i += len;
    }
  }
  return out;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp >= kEscapedByteBase + 0x80 && cp <= kEscapedByteBase + 0xFF) {
    out.push_back(static_cast<char>(cp - kEscapedByteBase));
  } else if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string encode_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) append_utf8(out, cp);
  return out;
}

size_t count_code_points(std::string_view s) {
  bool ascii = std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  return ascii ? s.size() : decode_utf8(s).size();
}

bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::u32string u = decode_utf8(s);
  const std::u32string set = chars ? decode_utf8(*chars) : std::u32string();
  auto strippable = [&](char32_t c) { return chars ? in_set(c, set) : is_space(c); };
  size_t b = 0, e = u.size();
  if (left) {
    while (b < e && strippable(u[b])) ++b;
  }
  if (right) {
    while (e > b && strippable(u[e - 1])) --e;
  }
  return encode_utf8(std::u32string_view(u).substr(b, e - b));
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit,
                               bool from_right) {
  std::vector<std::string> parts;
  if (sep) {
    const std::string& d = *sep;
    if (!from_right) {
      size_t pos = 0;
      while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        size_t hit = s.find(d, pos);
        if (hit == std::string_view::npos) break;
        parts.emplace_back(s.substr(pos, hit - pos));
        pos = hit + d.size();
      }
      parts.emplace_back(s.substr(pos));
    } else {
      size_t end = s.size();
      while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
        if (end < d.size()) break;
        size_t hit = s.rfind(d, end - d.size());
        if (hit == std::string_view::npos) break;
        parts.emplace_back(s.substr(hit + d.size(), end - hit - d.size()));
        end = hit;
      }
      parts.emplace_back(s.substr(0, end));
      std::reverse(parts.begin(), parts.end());
    }
    return parts;
  }
  const std::u32string u = decode_utf8(s);
  const int64_t n = static_cast<int64_t>(u.size());
  if (!from_right) {
    int64_t i = 0;
    while (true) {
      while (i < n && is_space(u[i])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
        parts.push_back(encode_utf8(std::u32string_view(u).substr(i)));
        break;
      }
      int64_t j = i;
      while (j < n && !is_space(u[j])) ++j;
      parts.push_back(encode_utf8(std::u32string_view(u).substr(i, j - i)));
      i = j;
    }
  } else {
    int64_t i = n;
    while (true) {
      while (i > 0 && is_space(u[i - 1])) --i;
      if (i <= 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
        parts.push_back(encode_utf8(std::u32string_view(u).substr(0, i)));
        break;
      }
      int64_t j = i;
      while (j > 0 && !is_space(u[j - 1])) --j;
      parts.push_back(encode_utf8(std::u32string_view(u).substr(j, i - j)));
      i = j;
    }
    std::reverse(parts.begin(), parts.end());
  }
  return parts;
}

std::vector<std::string> splitlines(std::string_view s, bool keep_ends) {
  const std::u32string u = decode_utf8(s);
  std::vector<std::string> lines;
  size_t start = 0, i = 0;
  while (i < u.size()) {
    if (!is_line_break(u[i])) {
      ++i;
      continue;
    }
    size_t brk = (u[i] == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ? 2 : 1;
    size_t end = keep_ends ? i + brk : i;
    lines.push_back(encode_utf8(std::u32string_view(u).substr(start, end - start)));
    i += brk;
    start = i;
  }
  if (start < u.size()) lines.push_back(encode_utf8(std::u32string_view(u).substr(start)));
  return lines;
}

std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count_max) {
  std::string out;
  if (from.empty()) {
    // Python inserts `to` before every code point and at the end.
    const std::u32string u = decode_utf8(s);
    int64_t done = 0;
    for (char32_t cp : u) {
      if (count_max < 0 || done < count_max) out += to, ++done;
      append_utf8(out, cp);
    }
    if (count_max < 0 || done < count_max) out += to;
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count_max < 0 || done < count_max) {
    size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(count_code_points(s)) + 1;
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size())) ++n;
  return n;
}

int64_t find(std::string_view s, std::string_view sub, bool from_right) {
  size_t hit = from_right ? s.rfind(sub) : s.find(sub);
  if (hit == std::string_view::npos) return -1;
  return static_cast<int64_t>(count_code_points(s.substr(0, hit)));
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(ascii_upper(static_cast<unsigned char>(c)));
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(ascii_lower(static_cast<unsigned char>(c)));
  return out;
}

std::string str_title(std::string_view s) {
  std::u32string u = decode_utf8(s);
  bool in_word = false;
  for (char32_t& c : u) {
    if (is_cased_letter(c)) {
      c = in_word ? ascii_lower(c) : ascii_upper(c);
      in_word = true;
    } else {
      in_word = false;
    }
  }
  return encode_utf8(u);
}

std::string capitalize(std::string_view s) {
  std::u32string u = decode_utf8(s);
  for (size_t i = 0; i < u.size(); ++i) u[i] = i == 0 ? ascii_upper(u[i]) : ascii_lower(u[i]);
  return encode_utf8(u);
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

std::string repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  char buf[16];
  for (char32_t c : decode_utf8(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c >= kEscapedByteBase + 0x80 && c <= kEscapedByteBase + 0xFF) {
      std::snprintf(buf, sizeof(buf), "\\udc%02x", static_cast<unsigned>(c - kEscapedByteBase));
      out += buf;
    } else if (is_printable(c)) {
      append_utf8(out, c);
    } else if (c < 0x100) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else if (c < 0x10000) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(c));
      out += buf;
    }
  }
  out.push_back(quote);
  return out;
}

std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (!sci.empty() && sci[0] == '-') sign = "-", sci.erase(0, 1);
  const size_t e_pos = sci.find('e');
  std::string digits = sci.substr(0, e_pos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exponent = std::stoi(sci.substr(e_pos + 1));
  const int decpt = exponent + 1;  // position of the decimal point after the first digit
  const int n = static_cast<int>(digits.size());
  std::string out = sign;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0." + std::string(-decpt, '0') + digits;
    } else if (decpt >= n) {
      out += digits + std::string(decpt - n, '0') + ".0";
    } else {
      out += digits.substr(0, decpt) + "." + digits.substr(decpt);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (n > 1) out += "." + digits.substr(1);
  std::snprintf(buf, sizeof(buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + buf;
}

std::vector<int64_t> slice_indexes(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                                   std::optional<int64_t> step) {
  const int64_t st = step.value_or(1);
  std::vector<int64_t> out;
  if (st == 0) return out;
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) x += length;
    if (st > 0) return std::clamp<int64_t>(x, 0, length);
    return std::clamp<int64_t>(x, -1, length - 1);
  };
  if (st > 0) {
    for (int64_t i = clamp(start, 0), e = clamp(stop, length); i < e; i += st) out.push_back(i);
  } else {
    for (int64_t i = clamp(start, length - 1), e = clamp(stop, -1); i > e; i += st) out.push_back(i);
  }
  return out;
}

}  // namespace deepinfer::chat::py
