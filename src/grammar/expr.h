// Expr: the tree form of a grammar rule body that front ends (EBNF, regex, JSON Schema) build
// and GrammarBuilder lowers to the flat Grammar. Characters are Unicode code points until
// lowering turns them into UTF-8 byte sequences; kBytes matches raw bytes.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "grammar/byte_set.h"

namespace deepinfer::grammar {

// A set of Unicode scalar values as sorted, disjoint, non-adjacent inclusive ranges.
using CodePointRanges = std::vector<std::pair<char32_t, char32_t>>;

inline constexpr char32_t kMaxCodePoint = 0x10FFFF;
inline constexpr uint32_t kUnbounded = std::numeric_limits<uint32_t>::max();

// Normalizes ranges (any order, overlapping) and removes the surrogates D800-DFFF.
CodePointRanges normalize_ranges(CodePointRanges ranges);
// All scalar values not in `ranges` (which must be normalized).
CodePointRanges complement_ranges(const CodePointRanges& ranges);

struct Expr {
  enum class Kind : uint8_t {
    kSeq,         // children in order; empty: the empty string
    kAlt,         // one of children; must have at least one
    kRepeat,      // children[0] between min and max times (max may be kUnbounded)
    kCodePoints,  // one code point of `ranges` (UTF-8 encoded); empty ranges match nothing
    kBytes,       // one byte of `bytes`
    kRule,        // the rule `rule` (an id from GrammarBuilder::declare)
  };
  Kind kind = Kind::kSeq;
  std::vector<Expr> children;
  CodePointRanges ranges;
  ByteSet bytes;
  uint32_t rule = 0;
  uint32_t min = 0, max = 0;

  static Expr Empty() { return Expr{}; }
  static Expr Seq(std::vector<Expr> parts);
  static Expr Alt(std::vector<Expr> options);
  static Expr Repeat(Expr item, uint32_t min, uint32_t max);
  static Expr Optional(Expr item) { return Repeat(std::move(item), 0, 1); }
  static Expr CodePoints(CodePointRanges normalized);
  static Expr Char(char32_t c) { return CodePoints({{c, c}}); }
  static Expr Bytes(ByteSet set);
  // The UTF-8 text `s`, byte for byte.
  static Expr Literal(std::string_view s);
  static Expr Ref(uint32_t rule);
};

}  // namespace deepinfer::grammar
