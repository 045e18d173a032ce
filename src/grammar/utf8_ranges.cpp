#include "grammar/utf8_ranges.h"

#include <algorithm>


namespace deepinfer::grammar {
namespace {

constexpr char32_t kMaxOfLength[4] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};

int encode(char32_t c, uint8_t* out) {
  if (c < 0x80) {
    out[0] = uint8_t(c);
    return 1;
  }
  if (c < 0x800) {
    out[0] = uint8_t(0xC0 | (c >> 6));
    out[1] = uint8_t(0x80 | (c & 0x3F));
    return 2;
  }
  if (c < 0x10000) {
    out[0] = uint8_t(0xE0 | (c >> 12));
    out[1] = uint8_t(0x80 | ((c >> 6) & 0x3F));
    out[2] = uint8_t(0x80 | (c & 0x3F));
    return 3;
  }
  out[0] = uint8_t(0xF0 | (c >> 18));
  out[1] = uint8_t(0x80 | ((c >> 12) & 0x3F));
  out[2] = uint8_t(0x80 | ((c >> 6) & 0x3F));
  out[3] = uint8_t(0x80 | (c & 0x3F));
  return 4;
}

// Splits [lo, hi] (same encoded length) until each piece is a product of byte ranges: a range
// whose continuation bytes below some position span the full 0x80-0xBF.
void split_same_length(char32_t lo, char32_t hi, std::vector<std::vector<ByteSet>>& out) {
  uint8_t a[4], b[4];
  const int n = encode(lo, a);
  encode(hi, b);
  for (int i = 1; i < n; ++i) {
    const char32_t m = (char32_t(1) << (6 * i)) - 1;  // low 6*i bits
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_same_length(lo, lo | m, out);
        split_same_length((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_same_length(lo, (hi & ~m) - 1, out);
        split_same_length(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::vector<ByteSet> seq;
  for (int i = 0; i < n; ++i) seq.push_back(ByteSet::Range(a[i], b[i]));
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<std::vector<ByteSet>> utf8_byte_sequences(const CodePointRanges& ranges) {
  std::vector<std::vector<ByteSet>> out;
  for (auto [lo, hi] : ranges) {
    char32_t start = lo;
    for (int len = 0; len < 4 && start <= hi; ++len) {
      if (start > kMaxOfLength[len]) continue;
      const char32_t end = std::min(hi, kMaxOfLength[len]);
      split_same_length(start, end, out);
      start = end + 1;
    }
  }
  return out;
}

}  // namespace deepinfer::grammar
