#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace deepinfer::byte_level {
namespace {

struct Tables {
  std::array<char32_t, 256> code_point{};
  std::array<std::string, 256> utf8;
  std::array<int16_t, 256 + 68> byte_of;  // inverse of code_point
  Tables() {
    byte_of.fill(-1);
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      code_point[b] = printable(b) ? char32_t(b) : next++;
      utf8::append_code_point(utf8[b], code_point[b]);
      byte_of[code_point[b]] = int16_t(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::string& char_for_byte(uint8_t b) { return tables().utf8[b]; }

int byte_for_char(char32_t c) { return c < 256 + 68 ? tables().byte_of[c] : -1; }

void append_mapped(std::string& out, std::string_view bytes) {
  const Tables& t = tables();
  for (char c : bytes) out += t.utf8[static_cast<uint8_t>(c)];
}

}  // namespace deepinfer::byte_level
