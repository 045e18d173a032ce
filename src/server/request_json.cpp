#include "server/request_json.h"

namespace deepinfer {

int json_nesting_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
      if (deepest > limit) return limit + 1;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

std::string parse_untrusted_json(std::string_view text, nlohmann::ordered_json& out, int max_depth) {
  if (json_nesting_depth(text, max_depth) > max_depth)
    return "the request body nests arrays and objects deeper than " + std::to_string(max_depth) + " levels";
  out = nlohmann::ordered_json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (out.is_discarded()) return "the request body is not valid JSON (or holds invalid UTF-8)";
  return "";
}

std::optional<std::string> string_member(const nlohmann::ordered_json& obj, const char* key) {
  const nlohmann::ordered_json* v = find_member(obj, key);
  if (!v || !v->is_string()) return std::nullopt;
  return v->get_ref<const std::string&>();
}

const nlohmann::ordered_json* find_member(const nlohmann::ordered_json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

}  // namespace deepinfer
