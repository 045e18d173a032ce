// Unicode normalization forms (NFC, NFD, NFKC, NFKD) with the data of the Hugging Face
// `tokenizers` library (see unicode_tables.h), implemented as its unicode-normalization crate
// does: full decomposition, canonical ordering of combining marks, then (NFC, NFKC) canonical
// composition of unblocked pairs; Hangul syllables algorithmically. Thread-safe.
#pragma once

#include <string>

namespace deepinfer::unicode {

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };

// Rewrites `text` (valid UTF-8) in normal form `form`.
void normalize(std::string& text, NormalForm form);

}  // namespace deepinfer::unicode
