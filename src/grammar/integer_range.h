// Decimal integers in a range, as an Expr: the canonical JSON text (no leading zeros, no "-0")
// of exactly the integers lo..hi, either bound optional.
#pragma once

#include <cstdint>
#include <optional>

#include "grammar/expr.h"

namespace deepinfer::grammar {

// Requires lo <= hi when both are given.
Expr integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi);

}  // namespace deepinfer::grammar
