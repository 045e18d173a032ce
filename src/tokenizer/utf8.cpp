#include "tokenizer/utf8.h"

namespace deepinfer::utf8 {
namespace {

// Length of the longest prefix of `p[0..n)` that starts a well-formed sequence (Unicode Table 3-7),
// and whether that prefix is a complete character.
struct Prefix {
  size_t length;
  bool complete;
};

Prefix well_formed_prefix(const uint8_t* p, size_t n) {
  const uint8_t b = p[0];
  if (b < 0x80) return {1, true};
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    need = 2;
  } else if (b == 0xE0) {
    need = 3, lo = 0xA0;
  } else if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) {
    need = 3;
  } else if (b == 0xED) {
    need = 3, hi = 0x9F;
  } else if (b == 0xF0) {
    need = 4, lo = 0x90;
  } else if (b >= 0xF1 && b <= 0xF3) {
    need = 4;
  } else if (b == 0xF4) {
    need = 4, hi = 0x8F;
  } else {
    return {1, false};
  }
  size_t len = 1;
  for (; len < need && len < n; ++len) {
    const uint8_t c = p[len];
    const uint8_t l = len == 1 ? lo : 0x80;
    const uint8_t h = len == 1 ? hi : 0xBF;
    if (c < l || c > h) return {len, false};
  }
  return {len, len == need};
}

}  // namespace

size_t find_invalid(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // Eight ASCII bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      __builtin_memcpy(&w, p + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    const Prefix prefix = well_formed_prefix(p + i, n - i);
    if (!prefix.complete) return i;
    i += prefix.length;
  }
  return std::string_view::npos;
}

char32_t previous_code_point(std::string_view s, size_t& i) {
  size_t start = i - 1;
  while (start > 0 && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
  i = start;
  return next_code_point(s, start);
}

void append_code_point(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

void append_lossy(std::string& out, std::string_view bytes) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 0;
  size_t run_start = 0;  // start of the pending run of valid bytes
  while (i < n) {
    if (p[i] < 0x80) {
      ++i;
      continue;
    }
    const Prefix prefix = well_formed_prefix(p + i, n - i);
    if (prefix.complete) {
      i += prefix.length;
      continue;
    }
    out.append(bytes.substr(run_start, i - run_start));
    out.append(kReplacementChar);
    i += prefix.length;
    run_start = i;
  }
  out.append(bytes.substr(run_start));
}

}  // namespace deepinfer::utf8
