#include "chat/py_json.h"

#include "chat/jinja_value.h"
#include "core/check.h"

namespace deepinfer::chat {

std::string python_json_dumps(const nlohmann::ordered_json& value) {
  std::string out;
  std::string error;
  // Every JSON value converts to a serializable Value (no functions, string keys only).
  const bool ok = jinja::Value::FromJson(value).to_json(out, /*ensure_ascii=*/false, /*indent=*/-1, ", ", ": ",
                                                        /*sort_keys=*/false, error);
  DI_CHECK_MSG(ok, "%s", error.c_str());
  return out;
}

}  // namespace deepinfer::chat
