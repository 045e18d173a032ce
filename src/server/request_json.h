// Untrusted JSON from HTTP bodies: parsed with a nesting limit, read through typed accessors
// that never throw.
//
// The depth is checked on the raw bytes before nlohmann's parser builds a tree, so no recursive
// copy, conversion (chat templates) or destruction ever meets a deeply nested value.
// nlohmann's `value(key, default)`, `get<T>()`, `at()` and implicit conversions throw
// `type_error` on a value of another type; request code uses the accessors below instead.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace deepinfer {

// Arrays and objects nested deeper than this are rejected (the README says so).
inline constexpr int kMaxJsonDepth = 64;

// Deepest nesting of arrays and objects in `text`, counting brackets outside strings; stops
// counting (and returns limit + 1) once it passes `limit`. Exact for valid JSON; for invalid
// JSON the parser reports the error afterwards.
int json_nesting_depth(std::string_view text, int limit);

// Why a body was refused; empty when `out` holds the parsed value.
std::string parse_untrusted_json(std::string_view text, nlohmann::ordered_json& out, int max_depth = kMaxJsonDepth);

// obj[key] when obj is an object holding a string there; nullopt otherwise (absent, null, or
// another type).
std::optional<std::string> string_member(const nlohmann::ordered_json& obj, const char* key);

// obj[key] when obj is an object holding that key (of any type, null included); nullptr otherwise.
const nlohmann::ordered_json* find_member(const nlohmann::ordered_json& obj, const char* key);

}  // namespace deepinfer
