// The byte-level alphabet of GPT-2-style tokenizers: every byte value maps to one printable code
// point (printable Latin-1 bytes to themselves, the other 68 bytes to U+0100..U+0143 in order), so
// any byte string becomes text that the vocabulary can hold.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace deepinfer::byte_level {

// The UTF-8 encoding of the code point that stands for byte b.
const std::string& char_for_byte(uint8_t b);

// The byte that code point c stands for, or -1 when c is not in the alphabet.
int byte_for_char(char32_t c);

// Appends the byte-level text of `bytes` (each byte through char_for_byte).
void append_mapped(std::string& out, std::string_view bytes);

}  // namespace deepinfer::byte_level
