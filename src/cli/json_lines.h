// The JSON-lines loop of the offline commands (tokenize, detokenize, chat-template): one output
// line per non-blank input line, errors reported in-line so the rest continue.
#pragma once

#include <iostream>
#include <string>

#include "core/status.h"

namespace deepinfer::cli {

// Reads stdin line by line; for each non-blank line writes handle(line) as one compact JSON line
// on stdout, or {"error": message} when it fails. Returns 1 if any line failed, else 0.
// Json: nlohmann::json or nlohmann::ordered_json; handle: (const std::string&) -> Result<Json>.
template <class Json, class Handle>
int map_json_lines(Handle handle) {
  std::ios::sync_with_stdio(false);
  bool failed = false;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Result<Json> out = handle(line);
    if (!out.ok()) {
      failed = true;
      out = Json{{"error", out.status().message()}};
    }
    std::cout << out->dump(-1, ' ', false, Json::error_handler_t::replace) << '\n' << std::flush;
  }
  return failed ? 1 : 0;
}

}  // namespace deepinfer::cli
