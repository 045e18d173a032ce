// JSON Schema `format` values the compiler supports, each as a regex (regex_parser dialect) whose
// matches the format's validators accept: a subset of the format where the full one is not
// regular (dates are limited to days 1-28 in February).
#pragma once

#include <optional>
#include <string_view>

namespace deepinfer::grammar {

// The regex of `format`, or nullopt when the format is not supported.
std::optional<std::string_view> format_regex(std::string_view format);

}  // namespace deepinfer::grammar
