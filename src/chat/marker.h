// Helpers for finding marker strings in streamed text, where a marker may be split across deltas.
#pragma once

#include <algorithm>
#include <string_view>

namespace deepinfer::chat {

// Length of the longest suffix of `text` that is a proper prefix of `marker`: the bytes a
// streaming parser must hold back because the next delta may complete the marker.
inline size_t partial_marker_suffix(std::string_view text, std::string_view marker) {
  const size_t max = std::min(text.size(), marker.size() - 1);
  for (size_t n = max; n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace deepinfer::chat
