#include "grammar/integer_range.h"

#include <string>

#include "core/check.h"

namespace deepinfer::grammar {
namespace {

Expr digit(char lo, char hi) { return Expr::CodePoints({{char32_t(lo), char32_t(hi)}}); }
Expr any_digits(uint32_t n) { return Expr::Repeat(digit('0', '9'), n, n); }

// Digit strings of equal length from lo to hi (lo <= hi), leading zeros included.
Expr same_length(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return Expr::Empty();
  const uint32_t rest = uint32_t(lo.size() - 1);
  if (lo[0] == hi[0]) return Expr::Seq({digit(lo[0], lo[0]), same_length(lo.substr(1), hi.substr(1))});
  const bool lo_full = lo.find_first_not_of('0', 1) == std::string::npos;
  const bool hi_full = hi.find_first_not_of('9', 1) == std::string::npos;
  std::vector<Expr> options;
  char mid_lo = char(lo[0] + 1), mid_hi = char(hi[0] - 1);
  if (lo_full) {
    mid_lo = lo[0];
  } else {
    options.push_back(Expr::Seq({digit(lo[0], lo[0]), same_length(lo.substr(1), std::string(rest, '9'))}));
  }
  if (hi_full) mid_hi = hi[0];
  if (mid_lo <= mid_hi) options.push_back(Expr::Seq({digit(mid_lo, mid_hi), any_digits(rest)}));
  if (!hi_full) {
    options.push_back(Expr::Seq({digit(hi[0], hi[0]), same_length(std::string(rest, '0'), hi.substr(1))}));
  }
  return Expr::Alt(std::move(options));
}

// Non-negative integers lo..hi (hi absent: up to max_digits digits), canonical text.
Expr non_negative(uint64_t lo, std::optional<uint64_t> hi, uint32_t max_digits) {
  const std::string a = std::to_string(lo);
  std::vector<Expr> options;
  const size_t max_len = hi ? std::to_string(*hi).size() : a.size();
  for (size_t len = a.size(); len <= max_len; ++len) {
    const std::string first = len == a.size() ? a : "1" + std::string(len - 1, '0');
    const std::string last = hi && len == max_len ? std::to_string(*hi) : std::string(len, '9');
    options.push_back(same_length(first, last));
  }
  if (!hi && a.size() < max_digits) {
    // every longer number, up to max_digits digits
    options.push_back(Expr::Seq({digit('1', '9'), any_digits(uint32_t(a.size())),
                                 Expr::Repeat(digit('0', '9'), 0, max_digits - 1 - uint32_t(a.size()))}));
  }
  return Expr::Alt(std::move(options));
}

uint64_t magnitude(int64_t v) { return v < 0 ? uint64_t(-(v + 1)) + 1 : uint64_t(v); }

}  // namespace

Expr integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi, uint32_t max_digits) {
  DI_CHECK(!lo || !hi || *lo <= *hi);
  std::vector<Expr> options;
  // Negative part: -m for m in [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    const uint64_t m_lo = hi && *hi < 0 ? magnitude(*hi) : 1;
    std::optional<uint64_t> m_hi;
    if (lo) m_hi = magnitude(*lo);
    options.push_back(Expr::Seq({Expr::Char('-'), non_negative(m_lo, m_hi, max_digits)}));
  }
  // Non-negative part.
  if (!hi || *hi >= 0) {
    const uint64_t n_lo = lo && *lo > 0 ? uint64_t(*lo) : 0;
    std::optional<uint64_t> n_hi;
    if (hi) n_hi = uint64_t(*hi);
    options.push_back(non_negative(n_lo, n_hi, max_digits));
  }
  return Expr::Alt(std::move(options));
}

}  // namespace deepinfer::grammar
