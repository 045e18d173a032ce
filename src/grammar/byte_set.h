// ByteSet: a set of byte values (256 bits), the terminal of the byte-level grammar.
#pragma once

#include <array>
#include <cstdint>

namespace deepinfer::grammar {

struct ByteSet {
  std::array<uint64_t, 4> words{};

  static ByteSet Single(uint8_t b) {
    ByteSet s;
    s.add(b);
    return s;
  }
  // Bytes lo..hi inclusive (empty when lo > hi).
  static ByteSet Range(uint8_t lo, uint8_t hi) {
    ByteSet s;
    for (unsigned b = lo; b <= hi; ++b) s.add(uint8_t(b));
    return s;
  }
  void add(uint8_t b) { words[b >> 6] |= uint64_t(1) << (b & 63); }
  bool contains(uint8_t b) const { return (words[b >> 6] >> (b & 63)) & 1; }
  bool empty() const { return (words[0] | words[1] | words[2] | words[3]) == 0; }
  bool subset_of(const ByteSet& o) const {
    return ((words[0] & ~o.words[0]) | (words[1] & ~o.words[1]) | (words[2] & ~o.words[2]) |
            (words[3] & ~o.words[3])) == 0;
  }
  ByteSet& operator|=(const ByteSet& o) {
    for (int i = 0; i < 4; ++i) words[i] |= o.words[i];
    return *this;
  }
  bool operator==(const ByteSet&) const = default;
  auto operator<=>(const ByteSet&) const = default;
};

}  // namespace deepinfer::grammar
