#include "cli/token_id_list.h"

#include <climits>
#include <cstdlib>
#include <sstream>

namespace deepinfer::cli {

Result<std::vector<int32_t>> parse_token_id_list(const std::string& text, const std::string& flag) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0 || v > INT32_MAX)
      return Status::Error(flag + ": '" + item + "' is not a token id");
    ids.push_back(int32_t(v));
  }
  if (ids.empty()) return Status::Error(flag + ": no token ids given");
  return ids;
}

}  // namespace deepinfer::cli
