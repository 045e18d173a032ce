// JSON text as Python's json.dumps(value, ensure_ascii=False) writes it: ", " and ": "
// separators, keys in their order, floats as Python's repr. DeepSeek's encoders print tool
// schemas and argument values this way.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace deepinfer::chat {

std::string python_json_dumps(const nlohmann::ordered_json& value);

}  // namespace deepinfer::chat
