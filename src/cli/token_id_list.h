// Token ids given on the command line as a comma-separated list ("3,14,15").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace deepinfer::cli {

// The ids of `text`; an error naming `flag` for an item that is not a non-negative int32, or for
// an empty list.
Result<std::vector<int32_t>> parse_token_id_list(const std::string& text, const std::string& flag);

}  // namespace deepinfer::cli
