// UTF-8 byte patterns of code point ranges: the byte-level form of a character class.
#pragma once

#include <cstdint>
#include <vector>

#include "grammar/byte_set.h"
#include "grammar/expr.h"

namespace deepinfer::grammar {

// Sequences of byte ranges whose concatenations are exactly the UTF-8 encodings of the code
// points in `ranges` (normalized: no surrogates). Each sequence has 1 to 4 ByteSets; sequences
// of one length never overlap.
std::vector<std::vector<ByteSet>> utf8_byte_sequences(const CodePointRanges& ranges);

}  // namespace deepinfer::grammar
