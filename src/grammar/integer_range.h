// Decimal integers in a range, as an Expr: the canonical JSON text (no leading zeros, no "-0")
// of exactly the integers lo..hi, either bound optional; an absent bound stops at max_digits
// digits (so that outputs stay bounded), which must be at least the digits of the other bound.
#pragma once

#include <cstdint>
#include <optional>

#include "grammar/expr.h"

namespace deepinfer::grammar {

// Requires lo <= hi when both are given.
Expr integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi, uint32_t max_digits);

}  // namespace deepinfer::grammar
