#include "grammar/grammar.h"

#include <cstdio>

namespace deepinfer::grammar {
namespace {

void append_byte(std::string& out, unsigned b) {
  if (b >= 0x21 && b < 0x7f && b != '\\' && b != ']' && b != '^' && b != '-' && b != '"') {
    out += char(b);
  } else {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02X", b);
    out += buf;
  }
}

void append_set(std::string& out, const ByteSet& s) {
  out += '[';
  for (unsigned b = 0; b < 256;) {
    if (!s.contains(uint8_t(b))) {
      ++b;
      continue;
    }
    unsigned e = b;
    while (e + 1 < 256 && s.contains(uint8_t(e + 1))) ++e;
    append_byte(out, b);
    if (e > b) {
      out += '-';
      append_byte(out, e);
    }
    b = e + 1;
  }
  out += ']';
}

}  // namespace

std::string Grammar::to_string() const {
  std::string out;
  for (const Rule& rule : rules) {
    out += rule.name;
    out += " ::=";
    for (uint32_t a = 0; a < rule.n_alts; ++a) {
      if (a > 0) out += " |";
      for (uint32_t p = alt_starts[rule.first_alt + a]; elements[p].kind != ElementKind::kEnd; ++p) {
        out += ' ';
        if (elements[p].kind == ElementKind::kRule) {
          out += rules[elements[p].value].name;
        } else {
          append_set(out, byte_sets[elements[p].value]);
        }
      }
      if (elements[alt_starts[rule.first_alt + a]].kind == ElementKind::kEnd) out += " \"\"";
    }
    out += '\n';
  }
  return out;
}

}  // namespace deepinfer::grammar
