#include "grammar/expr.h"

#include <algorithm>

namespace deepinfer::grammar {

CodePointRanges normalize_ranges(CodePointRanges ranges) {
  CodePointRanges split;
  for (auto [lo, hi] : ranges) {
    if (lo > hi) continue;
    hi = std::min(hi, kMaxCodePoint);
    if (lo > kMaxCodePoint) continue;
    if (lo < 0xD800 && hi > 0xDFFF) {
      split.push_back({lo, 0xD7FF});
      split.push_back({0xE000, hi});
    } else if (hi >= 0xD800 && lo <= 0xDFFF) {
      if (lo < 0xD800) split.push_back({lo, 0xD7FF});
      if (hi > 0xDFFF) split.push_back({0xE000, hi});
    } else {
      split.push_back({lo, hi});
    }
  }
  std::sort(split.begin(), split.end());
  CodePointRanges out;
  for (auto r : split) {
    if (!out.empty() && r.first <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, r.second);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

CodePointRanges complement_ranges(const CodePointRanges& ranges) {
  CodePointRanges out;
  char32_t next = 0;
  for (auto [lo, hi] : ranges) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return normalize_ranges(std::move(out));
}

Expr Expr::Seq(std::vector<Expr> parts) {
  if (parts.size() == 1) return std::move(parts[0]);
  Expr e;
  e.kind = Kind::kSeq;
  e.children = std::move(parts);
  return e;
}

Expr Expr::Alt(std::vector<Expr> options) {
  if (options.size() == 1) return std::move(options[0]);
  Expr e;
  e.kind = Kind::kAlt;
  e.children = std::move(options);
  return e;
}

Expr Expr::Repeat(Expr item, uint32_t min, uint32_t max) {
  if (min == 1 && max == 1) return item;
  Expr e;
  e.kind = Kind::kRepeat;
  e.children.push_back(std::move(item));
  e.min = min;
  e.max = max;
  return e;
}

Expr Expr::CodePoints(CodePointRanges normalized) {
  Expr e;
  e.kind = Kind::kCodePoints;
  e.ranges = std::move(normalized);
  return e;
}

Expr Expr::Bytes(ByteSet set) {
  Expr e;
  e.kind = Kind::kBytes;
  e.bytes = set;
  return e;
}

Expr Expr::Literal(std::string_view s) {
  std::vector<Expr> parts;
  for (char c : s) parts.push_back(Bytes(ByteSet::Single(uint8_t(c))));
  return Seq(std::move(parts));
}

Expr Expr::Ref(uint32_t rule) {
  Expr e;
  e.kind = Kind::kRule;
  e.rule = rule;
  return e;
}

}  // namespace deepinfer::grammar
