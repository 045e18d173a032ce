#include "dist/router/affinity_key.h"

#include <string>

#include <xxhash.h>

namespace deepinfer::router {

uint64_t affinity_key(const nlohmann::ordered_json& body, size_t n_bytes) {
  std::string text;
  if (body.is_object()) {
    const auto messages = body.find("messages");
    const auto prompt = body.find("prompt");
    const auto dump = [](const nlohmann::ordered_json& j) {
      return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    };
    if (messages != body.end()) {
      text = dump(*messages);
    } else if (prompt != body.end()) {
      if (prompt->is_string()) text = prompt->get<std::string>();
      else if (prompt->is_array() && !prompt->empty() && prompt->front().is_string()) text = prompt->front().get<std::string>();
      else text = dump(*prompt);
    }
  }
  if (text.size() > n_bytes) text.resize(n_bytes);
  return XXH3_64bits(text.data(), text.size());
}

}  // namespace deepinfer::router
