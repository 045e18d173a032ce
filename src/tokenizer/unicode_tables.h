// Unicode character data exactly as the Hugging Face `tokenizers` library sees it (its regex
// engine's general categories, Rust's is_numeric and to_lowercase, the regex crate's \w, the
// Punctuation pre-tokenizer's set), generated from the library by make_unicode_tables.py into
// unicode_tables.inc. The system's PCRE2 carries an older Unicode version, under which recent
// characters (new emoji, CJK extensions) would be classified differently, and the library's
// normalization data is older than current Unicode: only its own data gives its results.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::unicode {

struct CodePointRange {
  char32_t first, last;  // inclusive
};

// The code points of general category `name`: a two-letter category ("Lu", "Nd", "Cn"), a
// one-letter class ("L", "N", ...) or "L&"/"LC" (cased letters), sorted and merged; nullopt for
// any other name.
std::optional<std::vector<CodePointRange>> category(std::string_view name);

// Rust char::is_numeric: what the Digits pre-tokenizer splits on.
std::span<const CodePointRange> numeric();
// What the Punctuation pre-tokenizer splits on (ASCII punctuation or Unicode P* of its data).
std::span<const CodePointRange> punctuation();
// The regex crate's Unicode \w: Whitespace pre-tokenizer, single_word added tokens.
std::span<const CodePointRange> rust_word_chars();

bool contains(std::span<const CodePointRange> ranges, char32_t c);
// The code points (U+0000..U+10FFFF, surrogates excluded) not in `ranges` (sorted, merged).
std::vector<CodePointRange> complement(std::span<const CodePointRange> ranges);
// The code points of `a` that are not in `b` (both sorted and merged).
std::vector<CodePointRange> subtract(std::span<const CodePointRange> a, std::span<const CodePointRange> b);
// `ranges` as the inside of a PCRE2 character class: \x{41}-\x{5A}\x{61}...
std::string class_body(std::span<const CodePointRange> ranges);

// The UTF-8 lowercase of `c` per Rust's char::to_lowercase, or nullptr when it is `c` itself.
const char* lowercase(char32_t c);

// Normalization data of the unicode-normalization crate (Hangul syllables excepted: they are
// algorithmic). Decompositions are full (recursive) and canonically ordered, in UTF-8, or nullptr
// when `c` decomposes to itself; the compatibility one falls back to the canonical one.
const char* canonical_decomposition(char32_t c);
const char* compatibility_decomposition(char32_t c);
// The canonical combining class of `c` as a rank: 0 for starters, and the classes' order kept.
uint8_t combining_rank(char32_t c);
// The primary composite of `first` followed by `second`, or 0 when there is none.
char32_t composition(char32_t first, char32_t second);
// Code points with a canonical or compatibility decomposition (Hangul syllables excepted), and
// those with a non-zero combining class.
std::vector<char32_t> decomposed_code_points();
std::vector<char32_t> non_starters();
// All composition pairs (to find the characters that can combine with one before them).
struct CompositionPair {
  char32_t first, second, composite;
};
std::span<const CompositionPair> compositions();

}  // namespace deepinfer::unicode
