#include "tokenizer/unicode_tables.h"

#include <algorithm>
#include <cstdio>

namespace deepinfer::unicode {
namespace {

struct CategoryTable {
  const char* name;
  std::span<const CodePointRange> ranges;
};

struct LowercaseEntry {
  char32_t code_point;
  const char* lowercase;
};
using MappingEntry = LowercaseEntry;

struct CombiningEntry {
  char32_t code_point;
  uint8_t rank;
};

using CompositionEntry = CompositionPair;

#include "tokenizer/unicode_tables.inc"

std::vector<CodePointRange> merged(std::vector<CodePointRange> ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const CodePointRange& a, const CodePointRange& b) { return a.first < b.first; });
  std::vector<CodePointRange> out;
  for (const CodePointRange& r : ranges) {
    if (!out.empty() && r.first <= out.back().last + 1) {
      out.back().last = std::max(out.back().last, r.last);
    } else {
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace

std::optional<std::vector<CodePointRange>> category(std::string_view name) {
  const bool cased_letter = name == "L&" || name == "LC";
  std::vector<CodePointRange> ranges;
  bool found = false;
  for (const CategoryTable& table : kCategoryTables) {
    const std::string_view t = table.name;
    const bool match = cased_letter ? (t == "Lu" || t == "Ll" || t == "Lt")
                                    : (name.size() == 1 ? t[0] == name[0] : t == name);
    if (!match) continue;
    found = true;
    ranges.insert(ranges.end(), table.ranges.begin(), table.ranges.end());
  }
  if (!found) return std::nullopt;
  return merged(std::move(ranges));
}

std::span<const CodePointRange> numeric() { return kNumeric; }
std::span<const CodePointRange> punctuation() { return kPunctuation; }
std::span<const CodePointRange> rust_word_chars() { return kRustWordChars; }

bool contains(std::span<const CodePointRange> ranges, char32_t c) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), c,
                             [](char32_t value, const CodePointRange& r) { return value < r.first; });
  return it != ranges.begin() && c <= std::prev(it)->last;
}

std::vector<CodePointRange> complement(std::span<const CodePointRange> ranges) {
  std::vector<CodePointRange> out;
  char32_t next = 0;
  auto add = [&](char32_t first, char32_t last) {
    // Surrogates are not characters; leave them out of every class.
    if (first <= 0xD7FF) out.push_back({first, std::min<char32_t>(last, 0xD7FF)});
    if (last >= 0xE000) out.push_back({std::max<char32_t>(first, 0xE000), last});
  };
  for (const CodePointRange& r : ranges) {
    if (r.first > next) add(next, r.first - 1);
    next = r.last + 1;
  }
  if (next <= 0x10FFFF) add(next, 0x10FFFF);
  return out;
}

std::vector<CodePointRange> subtract(std::span<const CodePointRange> a, std::span<const CodePointRange> b) {
  std::vector<CodePointRange> out;
  size_t j = 0;
  for (CodePointRange r : a) {
    while (j < b.size() && b[j].last < r.first) ++j;
    char32_t next = r.first;
    for (size_t k = j; k < b.size() && b[k].first <= r.last; ++k) {
      if (b[k].first > next) out.push_back({next, b[k].first - 1});
      next = std::max<char32_t>(next, b[k].last + 1);
    }
    if (next <= r.last) out.push_back({next, r.last});
  }
  return out;
}

std::string class_body(std::span<const CodePointRange> ranges) {
  std::string out;
  out.reserve(ranges.size() * 20);
  char buffer[40];
  for (const CodePointRange& r : ranges) {
    if (r.first == r.last) {
      std::snprintf(buffer, sizeof(buffer), "\\x{%X}", unsigned(r.first));
    } else {
      std::snprintf(buffer, sizeof(buffer), "\\x{%X}-\\x{%X}", unsigned(r.first), unsigned(r.last));
    }
    out += buffer;
  }
  return out;
}

namespace {

template <size_t N>
const char* find_mapping(const MappingEntry (&table)[N], char32_t c) {
  auto it = std::lower_bound(std::begin(table), std::end(table), c,
                             [](const MappingEntry& e, char32_t value) { return e.code_point < value; });
  return it != std::end(table) && it->code_point == c ? it->lowercase : nullptr;
}

}  // namespace

const char* lowercase(char32_t c) { return find_mapping(kLowercase, c); }

const char* canonical_decomposition(char32_t c) { return find_mapping(kCanonicalDecompositions, c); }

const char* compatibility_decomposition(char32_t c) {
  const char* compat = find_mapping(kCompatibilityDecompositions, c);
  return compat != nullptr ? compat : canonical_decomposition(c);
}

uint8_t combining_rank(char32_t c) {
  auto it = std::lower_bound(std::begin(kCombiningRanks), std::end(kCombiningRanks), c,
                             [](const CombiningEntry& e, char32_t value) { return e.code_point < value; });
  return it != std::end(kCombiningRanks) && it->code_point == c ? it->rank : 0;
}

char32_t composition(char32_t first, char32_t second) {
  auto it = std::lower_bound(std::begin(kCompositions), std::end(kCompositions), std::pair(first, second),
                             [](const CompositionPair& e, std::pair<char32_t, char32_t> v) {
                               return std::pair(e.first, e.second) < v;
                             });
  return it != std::end(kCompositions) && it->first == first && it->second == second ? it->composite : 0;
}

std::vector<char32_t> decomposed_code_points() {
  std::vector<char32_t> out;
  for (const MappingEntry& e : kCanonicalDecompositions) out.push_back(e.code_point);
  for (const MappingEntry& e : kCompatibilityDecompositions) out.push_back(e.code_point);
  return out;
}

std::vector<char32_t> non_starters() {
  std::vector<char32_t> out;
  for (const CombiningEntry& e : kCombiningRanks) out.push_back(e.code_point);
  return out;
}

std::span<const CompositionPair> compositions() { return kCompositions; }

}  // namespace deepinfer::unicode
