#include "grammar/ebnf_parser.h"

#include "grammar/expr.h"
#include "grammar/grammar_builder.h"
#include "grammar/text_cursor.h"

namespace deepinfer::grammar {
namespace {

bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9') || c == '-'; }

class EbnfParser {
 public:
  EbnfParser(std::string_view text, const GrammarLimits& limits)
      : in_(text), limits_(limits), builder_(limits) {}

  Result<Grammar> parse() {
    if (in_.rest().size() > limits_.max_text_bytes) {
      return Status::Error("grammar text longer than " + std::to_string(limits_.max_text_bytes) +
                           " bytes");
    }
    skip_space();
    if (in_.done()) return Status::Error("grammar is empty: expected rules 'name ::= ...'");
    while (!in_.done()) {
      const size_t at = in_.pos();
      std::string name = parse_name();
      if (name.empty()) return in_.error("expected a rule name");
      skip_space();
      if (!in_.consume("::=")) return in_.error("expected '::=' after rule name '" + name + "'");
      const uint32_t id = builder_.declare(name);
      if (builder_.is_defined(id)) {
        in_.set_pos(at);
        return in_.error("rule '" + name + "' is defined twice");
      }
      DI_ASSIGN_OR_RETURN(Expr body, parse_alternatives(0));
      skip_space();
      if (!in_.done() && !at_rule_start()) return in_.error("unbalanced ')'");
      DI_RETURN_IF_ERROR(builder_.define(id, body));
      skip_space();
    }
    const uint32_t root = builder_.declare("root");
    if (!builder_.is_defined(root)) return Status::Error("grammar has no rule 'root'");
    return builder_.build(root);
  }

 private:
  void skip_space() {
    while (!in_.done()) {
      const char c = in_.peek();
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        in_.next();
      } else if (c == '#') {
        while (!in_.done() && in_.peek() != '\n') in_.next();
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    std::string name;
    if (!is_name_start(in_.peek())) return name;
    while (is_name_char(in_.peek())) name += in_.next();
    return name;
  }

  // Whether the text here starts a new rule (`name ::=`).
  bool at_rule_start() {
    const size_t at = in_.pos();
    const bool yes = !parse_name().empty() && (skip_space(), in_.consume("::="));
    in_.set_pos(at);
    return yes;
  }

  Result<Expr> parse_alternatives(size_t depth) {
    if (depth > limits_.max_nesting) return in_.error("groups nested too deeply");
    std::vector<Expr> options;
    while (true) {
      DI_ASSIGN_OR_RETURN(Expr seq, parse_sequence(depth));
      options.push_back(std::move(seq));
      skip_space();
      if (in_.peek() != '|') break;
      in_.next();
    }
    return Expr::Alt(std::move(options));
  }

  Result<Expr> parse_sequence(size_t depth) {
    std::vector<Expr> items;
    while (true) {
      skip_space();
      const char c = in_.peek();
      if (in_.done() || c == '|' || c == ')' || at_rule_start()) break;
      DI_ASSIGN_OR_RETURN(Expr item, parse_primary(depth));
      DI_ASSIGN_OR_RETURN(item, parse_quantifiers(std::move(item)));
      items.push_back(std::move(item));
    }
    return Expr::Seq(std::move(items));
  }

  Result<Expr> parse_quantifiers(Expr item) {
    while (true) {
      const char c = in_.peek();
      if (c == '*') {
        in_.next();
        item = Expr::Repeat(std::move(item), 0, kUnbounded);
      } else if (c == '+') {
        in_.next();
        item = Expr::Repeat(std::move(item), 1, kUnbounded);
      } else if (c == '?') {
        in_.next();
        item = Expr::Optional(std::move(item));
      } else if (c == '{') {
        in_.next();
        DI_ASSIGN_OR_RETURN(uint32_t min, parse_count());
        uint32_t max = min;
        if (in_.peek() == ',') {
          in_.next();
          max = kUnbounded;
          if (in_.peek() != '}') {
            DI_ASSIGN_OR_RETURN(max, parse_count());
          }
        }
        if (!in_.consume("}")) return in_.error("expected '}' to close the repetition");
        if (max < min) return in_.error("repetition has max < min");
        item = Expr::Repeat(std::move(item), min, max);
      } else {
        return item;
      }
    }
  }

  Result<uint32_t> parse_count() {
    if (!(in_.peek() >= '0' && in_.peek() <= '9')) return in_.error("expected a repetition count");
    uint64_t n = 0;
    while (in_.peek() >= '0' && in_.peek() <= '9') {
      n = n * 10 + uint64_t(in_.next() - '0');
      if (n > limits_.max_repeat) {
        return in_.error("repetition count exceeds the limit " + std::to_string(limits_.max_repeat));
      }
    }
    return uint32_t(n);
  }

  Result<uint32_t> parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = in_.peek();
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return in_.error("expected " + std::to_string(digits) + " hex digits");
      in_.next();
      v = v * 16 + uint32_t(d);
    }
    return v;
  }

  // One character of a literal or class: an escape or a UTF-8 code point. `raw_byte` is set
  // for \xHH, which stands for a byte (so literals may hold bytes that are not UTF-8).
  Result<char32_t> parse_char(bool& raw_byte) {
    raw_byte = false;
    if (in_.peek() == '\\') {
      in_.next();
      const char e = in_.done() ? '\0' : in_.next();
      switch (e) {
        case 'n': return char32_t('\n');
        case 'r': return char32_t('\r');
        case 't': return char32_t('\t');
        case '\\': case '"': case '\'': case ']': case '[': case '-': case '^':
          return char32_t(e);
        case 'x': {
          raw_byte = true;
          DI_ASSIGN_OR_RETURN(uint32_t v, parse_hex(2));
          return char32_t(v);
        }
        case 'u': {
          DI_ASSIGN_OR_RETURN(uint32_t v, parse_hex(4));
          return check_scalar(v);
        }
        case 'U': {
          DI_ASSIGN_OR_RETURN(uint32_t v, parse_hex(8));
          return check_scalar(v);
        }
        default:
          return in_.error(std::string("unknown escape '\\") + e + "'");
      }
    }
    char32_t c;
    if (!in_.next_code_point(c)) return in_.error("invalid UTF-8");
    return c;
  }

  Result<char32_t> check_scalar(uint32_t v) {
    if (v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) {
      return in_.error("escape is not a Unicode scalar value");
    }
    return char32_t(v);
  }

  Result<Expr> parse_primary(size_t depth) {
    const char c = in_.peek();
    if (c == '"') {
      in_.next();
      std::vector<Expr> parts;
      while (in_.peek() != '"') {
        if (in_.done()) return in_.error("unterminated string literal");
        bool raw = false;
        DI_ASSIGN_OR_RETURN(char32_t ch, parse_char(raw));
        parts.push_back(raw ? Expr::Bytes(ByteSet::Single(uint8_t(ch))) : Expr::Char(ch));
      }
      in_.next();
      return Expr::Seq(std::move(parts));
    }
    if (c == '[') return parse_class();
    if (c == '.') {
      in_.next();
      return Expr::CodePoints(normalize_ranges({{0, kMaxCodePoint}}));
    }
    if (c == '(') {
      in_.next();
      DI_ASSIGN_OR_RETURN(Expr inner, parse_alternatives(depth + 1));
      skip_space();
      if (!in_.consume(")")) return in_.error("expected ')'");
      return inner;
    }
    std::string name = parse_name();
    if (name.empty()) return in_.error(std::string("unexpected character '") + c + "'");
    return Expr::Ref(builder_.declare(name));
  }

  Result<Expr> parse_class() {
    in_.next();  // '['
    const bool negated = in_.consume("^");
    CodePointRanges ranges;
    ByteSet raw_bytes;
    bool any_raw = false;
    while (in_.peek() != ']') {
      if (in_.done()) return in_.error("unterminated character class");
      bool raw_lo = false, raw_hi = false;
      DI_ASSIGN_OR_RETURN(char32_t lo, parse_char(raw_lo));
      char32_t hi = lo;
      if (in_.peek() == '-' && in_.peek(1) != ']') {
        in_.next();
        DI_ASSIGN_OR_RETURN(hi, parse_char(raw_hi));
        if (hi < lo) return in_.error("character range is out of order");
      }
      if (raw_lo != raw_hi && hi != lo) return in_.error("range mixes \\x bytes and characters");
      if (raw_lo && lo >= 0x80) {
        if (negated) return in_.error("negated class with \\x bytes above 7F");
        raw_bytes |= ByteSet::Range(uint8_t(lo), uint8_t(hi));
        any_raw = true;
      } else {
        ranges.push_back({lo, hi});
      }
    }
    in_.next();
    CodePointRanges set = normalize_ranges(std::move(ranges));
    if (negated) set = complement_ranges(set);
    if (!any_raw) return Expr::CodePoints(std::move(set));
    if (set.empty()) return Expr::Bytes(raw_bytes);
    return Expr::Alt({Expr::CodePoints(std::move(set)), Expr::Bytes(raw_bytes)});
  }

  TextCursor in_;
  GrammarLimits limits_;
  GrammarBuilder builder_;
};

}  // namespace

Result<Grammar> parse_ebnf(std::string_view text, const GrammarLimits& limits) {
  return EbnfParser(text, limits).parse();
}

}  // namespace deepinfer::grammar
