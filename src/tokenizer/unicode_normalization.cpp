#include "tokenizer/unicode_normalization.h"

#include <algorithm>
#include <vector>

#include "tokenizer/unicode_tables.h"
#include "tokenizer/utf8.h"

namespace deepinfer::unicode {
namespace {

// Hangul syllable arithmetic (Unicode chapter 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kSCount = kLCount * kVCount * kTCount;

bool is_hangul_syllable(char32_t c) { return c >= kSBase && c < kSBase + kSCount; }

// Per code point: what normalization may do to it, so text that nothing touches is left alone.
enum Flag : uint8_t {
  kCanonical = 1,       // NFD changes it (it has a canonical decomposition)
  kCompatibility = 2,   // NFKD changes it
  kNfcChanges = 4,      // NFC changes it on its own (singletons, composition exclusions)
  kNfkcChanges = 8,     // NFKC changes it on its own
  kNonStarter = 16,     // combining class is not 0
  kCombinesBack = 32,   // may compose with the character before it
};

void append_decomposition(std::vector<char32_t>& out, char32_t c, bool compatibility);
void compose_all(std::vector<char32_t>& chars);

// Whether composing the decomposition of `c` gives something other than `c`.
bool recomposition_differs(char32_t c, bool compatibility) {
  std::vector<char32_t> chars;
  append_decomposition(chars, c, compatibility);
  compose_all(chars);
  return chars.size() != 1 || chars[0] != c;
}

const std::vector<uint8_t>& flags() {
  static const std::vector<uint8_t> table = [] {
    std::vector<uint8_t> f(0x110000, 0);
    for (char32_t c = kSBase; c < kSBase + kSCount; ++c) f[c] |= kCanonical | kCompatibility;
    for (const char32_t c : decomposed_code_points()) {
      const bool canonical = canonical_decomposition(c) != nullptr;
      f[c] |= (canonical ? kCanonical : 0) | kCompatibility;
      if (canonical && recomposition_differs(c, false)) f[c] |= kNfcChanges;
      if (recomposition_differs(c, true)) f[c] |= kNfkcChanges;
    }
    for (const char32_t c : non_starters()) f[c] |= kNonStarter;
    for (const CompositionPair& p : compositions()) f[p.second] |= kCombinesBack;
    for (char32_t c = kVBase; c < kVBase + kVCount; ++c) f[c] |= kCombinesBack;
    for (char32_t c = kTBase + 1; c < kTBase + kTCount; ++c) f[c] |= kCombinesBack;
    return f;
  }();
  return table;
}

void append_decomposition(std::vector<char32_t>& out, char32_t c, bool compatibility) {
  if (is_hangul_syllable(c)) {
    const char32_t index = c - kSBase;
    out.push_back(kLBase + index / (kVCount * kTCount));
    out.push_back(kVBase + (index % (kVCount * kTCount)) / kTCount);
    if (index % kTCount != 0) out.push_back(kTBase + index % kTCount);
    return;
  }
  const char* mapping = compatibility ? compatibility_decomposition(c) : canonical_decomposition(c);
  if (mapping == nullptr) {
    out.push_back(c);
    return;
  }
  const std::string_view s(mapping);
  for (size_t i = 0; i < s.size();) out.push_back(utf8::next_code_point(s, i));
}

char32_t compose(char32_t first, char32_t second) {
  if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount) {
    return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
  }
  if (is_hangul_syllable(first) && (first - kSBase) % kTCount == 0 && second > kTBase &&
      second < kTBase + kTCount) {
    return first + (second - kTBase);
  }
  return composition(first, second);
}

// Canonical composition of a decomposed, ordered sequence, in place.
void compose_all(std::vector<char32_t>& chars) {
  size_t count = 0;
  long starter = -1;     // index in the output of the last starter
  int last_rank = -1;    // rank of the last character kept after the starter (-1: none)
  for (const char32_t c : chars) {
    const int rank = combining_rank(c);
    if (starter >= 0 && !(last_rank >= 0 && last_rank >= rank)) {
      if (const char32_t composite = compose(chars[size_t(starter)], c)) {
        chars[size_t(starter)] = composite;
        continue;
      }
    }
    if (rank == 0) {
      starter = long(count);
      last_rank = -1;
    } else {
      last_rank = rank;
    }
    chars[count++] = c;
  }
  chars.resize(count);
}

}  // namespace

void normalize(std::string& text, NormalForm form) {
  const bool compatibility = form == NormalForm::kNfkc || form == NormalForm::kNfkd;
  const bool composing = form == NormalForm::kNfc || form == NormalForm::kNfkc;
  const uint8_t changes = composing ? (compatibility ? kNfkcChanges : kNfcChanges)
                                    : (compatibility ? kCompatibility : kCanonical);
  const uint8_t touched = uint8_t(changes | kNonStarter | (composing ? kCombinesBack : 0));
  const std::vector<uint8_t>& f = flags();
  bool inert = true;
  for (size_t i = 0; i < text.size() && inert;) {
    if (static_cast<uint8_t>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    inert = (f[utf8::next_code_point(text, i)] & touched) == 0;
  }
  if (inert) return;

  std::vector<char32_t> chars;
  chars.reserve(text.size());
  for (size_t i = 0; i < text.size();) append_decomposition(chars, utf8::next_code_point(text, i), compatibility);
  // Canonical ordering: each run of non-starters sorted by combining class, stably.
  for (size_t i = 0; i < chars.size();) {
    if (combining_rank(chars[i]) == 0) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < chars.size() && combining_rank(chars[end]) != 0) ++end;
    std::stable_sort(chars.begin() + std::ptrdiff_t(i), chars.begin() + std::ptrdiff_t(end),
                     [](char32_t a, char32_t b) { return combining_rank(a) < combining_rank(b); });
    i = end;
  }
  if (composing) compose_all(chars);
  text.clear();
  for (const char32_t c : chars) utf8::append_code_point(text, c);
}

}  // namespace deepinfer::unicode
