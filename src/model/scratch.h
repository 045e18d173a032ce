// Grow-only scratch buffers of a forward pass: reused across steps, never shrunk.
#pragma once

#include <cstddef>
#include <vector>

namespace deepinfer {

// v's data, with room for at least n elements (contents of a grown buffer are unspecified).
template <typename T, typename A>
T* sized(std::vector<T, A>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

}  // namespace deepinfer
