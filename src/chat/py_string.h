// Python `str` semantics on UTF-8 strings, as chat templates see them through Jinja: lengths,
// indexes and slices count code points; whitespace is Python's Unicode whitespace; repr() quotes
// like CPython. Case mapping (upper, lower, title, capitalize) covers ASCII only: other
// characters pass through unchanged. Invalid UTF-8 bytes count as one code point each.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::chat::py {

std::u32string decode_utf8(std::string_view s);
std::string encode_utf8(std::u32string_view s);
void append_utf8(std::string& out, char32_t cp);
size_t count_code_points(std::string_view s);

bool is_space(char32_t cp);  // str.isspace()

// str.strip/lstrip/rstrip: `chars` absent strips whitespace, else any of its code points.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep, maxsplit) / str.rsplit: no `sep` splits on runs of whitespace. maxsplit < 0: all.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit,
                               bool from_right);
// str.splitlines(): Python's line boundaries (\n, \r, \r\n, \v, \f, \x1c-\x1e, \x85, \u2028, \u2029).
std::vector<std::string> splitlines(std::string_view s, bool keep_ends);
// str.replace(old, new, count); count < 0: all.
std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);
int64_t count(std::string_view s, std::string_view sub);
// str.find / str.rfind in code points, -1 when absent.
int64_t find(std::string_view s, std::string_view sub, bool from_right);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string str_title(std::string_view s);   // str.title()
std::string capitalize(std::string_view s);  // str.capitalize()

// markupsafe.escape(): & < > ' " as HTML entities.
std::string html_escape(std::string_view s);

// repr() of a str: quotes chosen as CPython does, escapes for non-printable code points.
std::string repr(std::string_view s);
// repr() of a float (shortest round-trip digits, CPython's exponent rules, "inf", "nan").
std::string float_repr(double v);

// Resolves Python slice bounds for a sequence of `length` elements into the visited indexes.
std::vector<int64_t> slice_indexes(int64_t length, std::optional<int64_t> start, std::optional<int64_t> stop,
                                   std::optional<int64_t> step);

}  // namespace deepinfer::chat::py
