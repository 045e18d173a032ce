#include "grammar/regex_parser.h"

#include "grammar/text_cursor.h"

namespace deepinfer::grammar {
namespace {

const CodePointRanges kDigit = {{'0', '9'}};
const CodePointRanges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const CodePointRanges kSpace = {{'\t', '\r'}, {' ', ' '}};

// \D, \W, \S: the ASCII characters outside the class (a subset of every engine's meaning, so
// what matches here matches there).
CodePointRanges ascii_complement(const CodePointRanges& ranges) {
  CodePointRanges out;
  for (auto r : complement_ranges(ranges)) {
    if (r.first < 0x80) out.push_back({r.first, std::min<char32_t>(r.second, 0x7F)});
  }
  return out;
}

class RegexParser {
 public:
  RegexParser(std::string_view pattern, const GrammarLimits& limits)
      : in_(pattern), limits_(limits) {}

  Result<Expr> parse() {
    if (in_.rest().size() > limits_.max_text_bytes) {
      return Status::Error("regex longer than " + std::to_string(limits_.max_text_bytes) + " bytes");
    }
    DI_ASSIGN_OR_RETURN(Expr e, parse_alternatives(0));
    if (!in_.done()) return error("unbalanced ')'");
    return e;
  }

 private:
  Status error(const std::string& message) const {
    return Status::Error("regex at offset " + std::to_string(in_.pos()) + ": " + message);
  }

  Result<Expr> parse_alternatives(size_t depth) {
    if (depth > limits_.max_nesting) return error("groups nested too deeply");
    std::vector<Expr> options;
    while (true) {
      DI_ASSIGN_OR_RETURN(Expr seq, parse_sequence(depth));
      options.push_back(std::move(seq));
      if (in_.peek() != '|' || in_.done()) break;
      in_.next();
    }
    return Expr::Alt(std::move(options));
  }

  Result<Expr> parse_sequence(size_t depth) {
    std::vector<Expr> items;
    if (depth == 0 && in_.peek() == '^' && !in_.done()) in_.next();
    while (!in_.done() && in_.peek() != '|' && in_.peek() != ')') {
      if (in_.peek() == '$') {
        in_.next();
        if (depth == 0 && (in_.done() || in_.peek() == '|')) break;
        return error("'$' is supported only at the end of the pattern");
      }
      if (in_.peek() == '^') return error("'^' is supported only at the start of the pattern");
      DI_ASSIGN_OR_RETURN(Expr atom, parse_atom(depth));
      DI_ASSIGN_OR_RETURN(atom, parse_quantifiers(std::move(atom)));
      items.push_back(std::move(atom));
    }
    return Expr::Seq(std::move(items));
  }

  // {m}, {m,}, {m,n} at the cursor; false (cursor unchanged) when the text is not one, in which
  // case '{' is a literal.
  Result<bool> parse_braces(uint32_t& min, uint32_t& max) {
    const size_t at = in_.pos();
    in_.next();
    uint64_t a = 0, b = 0;
    bool has_a = false, has_b = false, comma = false;
    while (in_.peek() >= '0' && in_.peek() <= '9') {
      a = std::min<uint64_t>(a * 10 + uint64_t(in_.next() - '0'), uint64_t(1) << 40);
      has_a = true;
    }
    if (in_.peek() == ',') {
      in_.next();
      comma = true;
      while (in_.peek() >= '0' && in_.peek() <= '9') {
        b = std::min<uint64_t>(b * 10 + uint64_t(in_.next() - '0'), uint64_t(1) << 40);
        has_b = true;
      }
    }
    if (!has_a || in_.peek() != '}') {
      in_.set_pos(at);
      return false;
    }
    in_.next();
    if (a > limits_.max_repeat || b > limits_.max_repeat) {
      return error("repetition count exceeds the limit " + std::to_string(limits_.max_repeat));
    }
    min = uint32_t(a);
    max = !comma ? min : has_b ? uint32_t(b) : kUnbounded;
    if (max < min) return error("repetition {m,n} has n < m");
    return true;
  }

  Result<Expr> parse_quantifiers(Expr atom) {
    bool quantified = false;
    while (!in_.done()) {
      const char c = in_.peek();
      uint32_t min = 0, max = 0;
      if (c == '*' || c == '+' || c == '?') {
        in_.next();
        min = c == '+' ? 1 : 0;
        max = c == '?' ? 1 : kUnbounded;
      } else if (c == '{') {
        DI_ASSIGN_OR_RETURN(bool ok, parse_braces(min, max));
        if (!ok) break;
      } else {
        break;
      }
      if (quantified) return error("nested quantifier");
      quantified = true;
      if (in_.peek() == '?') in_.next();  // lazy: the same language under whole-text matching
      if (in_.peek() == '+') return error("possessive quantifiers are not supported");
      atom = Expr::Repeat(std::move(atom), min, max);
    }
    return atom;
  }

  Result<Expr> parse_atom(size_t depth) {
    const char c = in_.peek();
    if (c == '(') {
      in_.next();
      if (in_.consume("?:")) {
      } else if (in_.peek() == '?' && in_.peek(1) == '<' && in_.peek(2) != '=' && in_.peek(2) != '!') {
        in_.consume("?<");
        while (!in_.done() && in_.peek() != '>') in_.next();
        if (!in_.consume(">")) return error("unterminated group name");
      } else if (in_.consume("?P<")) {
        while (!in_.done() && in_.peek() != '>') in_.next();
        if (!in_.consume(">")) return error("unterminated group name");
      } else if (in_.peek() == '?') {
        return error("lookaround and inline flags '(?' are not supported");
      }
      DI_ASSIGN_OR_RETURN(Expr inner, parse_alternatives(depth + 1));
      if (!in_.consume(")")) return error("expected ')'");
      return inner;
    }
    if (c == '[') return parse_class();
    if (c == '.') {
      in_.next();
      return Expr::CodePoints(complement_ranges({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
    }
    if (c == '*' || c == '+' || c == '?') return error("quantifier without an operand");
    if (c == '\\') {
      CodePointRanges ranges;
      DI_RETURN_IF_ERROR(parse_escape(false, ranges));
      return Expr::CodePoints(normalize_ranges(std::move(ranges)));
    }
    char32_t cp;
    if (!in_.next_code_point(cp)) return error("invalid UTF-8");
    return Expr::Char(cp);
  }

  Result<uint32_t> parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = in_.peek();
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0 || in_.done()) return error("expected " + std::to_string(digits) + " hex digits");
      in_.next();
      v = v * 16 + uint32_t(d);
    }
    return v;
  }

  // An escape at the cursor ('\\' first), appended to `out` as code point ranges.
  Status parse_escape(bool in_class, CodePointRanges& out) {
    in_.next();
    if (in_.done()) return error("pattern ends with '\\'");
    const char e = in_.next();
    auto one = [&](char32_t c) {
      out.push_back({c, c});
      return Status::Ok();
    };
    auto all = [&](const CodePointRanges& r) {
      out.insert(out.end(), r.begin(), r.end());
      return Status::Ok();
    };
    switch (e) {
      case 'd': return all(kDigit);
      case 'D': return all(ascii_complement(kDigit));
      case 'w': return all(kWord);
      case 'W': return all(ascii_complement(kWord));
      case 's': return all(kSpace);
      case 'S': return all(ascii_complement(kSpace));
      case 'n': return one('\n');
      case 'r': return one('\r');
      case 't': return one('\t');
      case 'f': return one('\f');
      case 'v': return one('\v');
      case '0': return one(0);
      case 'b':
        if (in_class) return one('\b');
        return error("word boundary '\\b' is not supported");
      case 'B': return error("word boundary '\\B' is not supported");
      case 'x': {
        DI_ASSIGN_OR_RETURN(uint32_t v, parse_hex(2));
        return one(v);
      }
      case 'u': {
        DI_ASSIGN_OR_RETURN(uint32_t v, parse_hex(4));
        if (v >= 0xD800 && v <= 0xDFFF) return error("surrogate escapes are not supported");
        return one(v);
      }
      case 'p': case 'P': return error("Unicode property escapes '\\p' are not supported");
      case 'c': return error("control escapes '\\c' are not supported");
      case 'k': return error("named backreferences '\\k' are not supported");
      default:
        if (e >= '1' && e <= '9') return error("backreferences are not supported");
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
          return error(std::string("unknown escape '\\") + e + "'");
        }
        if (uint8_t(e) >= 0x80) return error("escape of a non-ASCII character");
        return one(char32_t(e));
    }
  }

  Result<Expr> parse_class() {
    in_.next();  // '['
    const bool negated = in_.consume("^");
    CodePointRanges ranges;
    bool first = true;
    while (first || in_.peek() != ']') {
      if (in_.done()) return error("unterminated character class");
      first = false;
      CodePointRanges item;
      if (in_.peek() == '\\') {
        DI_RETURN_IF_ERROR(parse_escape(true, item));
      } else {
        char32_t cp;
        if (!in_.next_code_point(cp)) return error("invalid UTF-8");
        item.push_back({cp, cp});
      }
      if (in_.peek() == '-' && in_.peek(1) != ']' && !in_.rest().empty() && in_.rest().size() > 1) {
        if (item.size() != 1 || item[0].first != item[0].second) {
          return error("character class range with a class escape as its start");
        }
        in_.next();
        CodePointRanges hi;
        if (in_.peek() == '\\') {
          DI_RETURN_IF_ERROR(parse_escape(true, hi));
        } else {
          char32_t cp;
          if (!in_.next_code_point(cp)) return error("invalid UTF-8");
          hi.push_back({cp, cp});
        }
        if (hi.size() != 1 || hi[0].first != hi[0].second) {
          return error("character class range with a class escape as its end");
        }
        if (hi[0].first < item[0].first) return error("character class range out of order");
        item[0].second = hi[0].first;
      }
      ranges.insert(ranges.end(), item.begin(), item.end());
    }
    in_.next();
    CodePointRanges set = normalize_ranges(std::move(ranges));
    return Expr::CodePoints(negated ? complement_ranges(set) : set);
  }

  TextCursor in_;
  GrammarLimits limits_;
};

}  // namespace

Result<Expr> parse_regex(std::string_view pattern, const GrammarLimits& limits) {
  return RegexParser(pattern, limits).parse();
}

}  // namespace deepinfer::grammar
