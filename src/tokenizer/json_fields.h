// Typed access to the fields of tokenizer.json components, with errors that name the component
// and the field instead of exceptions. `where` is a path for messages, e.g. "pre_tokenizer[2]".
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "core/status.h"
#include "tokenizer/regex.h"

namespace deepinfer::json_fields {

using json = nlohmann::json;

inline Status missing(std::string_view where, std::string_view key, std::string_view kind) {
  return Status::Error(std::string(where) + ": field '" + std::string(key) + "' must be " +
                       std::string(kind));
}

// A required string field.
inline Result<std::string> get_string(const json& j, std::string_view key, std::string_view where) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return missing(where, key, "a string");
  return it->get<std::string>();
}

// An optional boolean field (absent or null gives `fallback`).
inline Result<bool> get_bool(const json& j, std::string_view key, bool fallback,
                             std::string_view where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return missing(where, key, "a boolean");
  return it->get<bool>();
}

// An optional non-negative integer field (absent or null gives `fallback`).
inline Result<size_t> get_size(const json& j, std::string_view key, size_t fallback,
                               std::string_view where) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number_unsigned()) return missing(where, key, "a non-negative integer");
  return it->get<size_t>();
}

// The "type" tag of a component.
inline Result<std::string> get_type(const json& j, std::string_view where) {
  if (!j.is_object()) return Status::Error(std::string(where) + ": expected an object");
  return get_string(j, "type", where);
}

// A pattern object of Split and Replace: {"String": "literal"} or {"Regex": "oniguruma pattern"}.
inline Result<std::shared_ptr<const Regex>> get_pattern(const json& j, std::string_view key,
                                                        std::string_view where) {
  auto it = j.find(key);
  if (it != j.end() && it->is_object()) {
    if (auto s = it->find("String"); s != it->end() && s->is_string()) {
      return Regex::FromLiteral(s->get<std::string>());
    }
    if (auto r = it->find("Regex"); r != it->end() && r->is_string()) {
      auto regex = Regex::FromOniguruma(r->get<std::string>());
      if (!regex.ok()) return Status::Error(std::string(where) + ": " + regex.status().message());
      return regex;
    }
  }
  return missing(where, key, "{\"String\": ...} or {\"Regex\": ...}");
}

}  // namespace deepinfer::json_fields
