#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "tokenizer/unicode_tables.h"
#include "tokenizer/utf8.h"

namespace deepinfer {
namespace {

constexpr std::string_view kWhiteSpace = "\\p{White_Space}";
constexpr std::string_view kNotWhiteSpace = "\\P{White_Space}";
constexpr std::string_view kHexChars = "0-9a-fA-F";

// Writes a set of code points (or its complement) as a class, or as class members when already
// inside one.
void append_set(std::string& out, std::span<const unicode::CodePointRange> ranges, bool negate,
                bool in_class) {
  const std::string body =
      negate ? unicode::class_body(unicode::complement(ranges)) : unicode::class_body(ranges);
  if (in_class) {
    out += body;
  } else {
    out.append("[").append(body).append("]");
  }
}

// Every Unicode scalar value in order, in UTF-8: PCRE2's view of a property is read off it.
const std::string& all_code_points() {
  static const std::string text = [] {
    std::string s;
    for (char32_t c = 0; c < 0x110000; ++c) {
      if (c < 0xD800 || c >= 0xE000) utf8::append_code_point(s, c);
    }
    return s;
  }();
  return text;
}

// The members of general category `name` by PCRE2's own Unicode tables (measured once).
std::vector<unicode::CodePointRange> pcre2_category(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, std::vector<unicode::CodePointRange>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = cache.find(name); it != cache.end()) return it->second;
  std::vector<unicode::CodePointRange> ranges;
  auto regex = Regex::FromPcre2("\\p{" + name + "}+");
  std::vector<Regex::Match> runs;
  if (regex.ok() && (*regex)->find_all(all_code_points(), runs).ok()) {
    const std::string& text = all_code_points();
    for (const Regex::Match& m : runs) {
      size_t i = m.start, end = m.end;
      const char32_t first = utf8::next_code_point(text, i);
      const char32_t last = utf8::previous_code_point(text, end);
      if (first < 0xD800 && last >= 0xE000) {
        ranges.push_back({first, 0xD7FF});
        ranges.push_back({0xE000, last});
      } else {
        ranges.push_back({first, last});
      }
    }
  }
  return cache[name] = ranges;
}

// General category `name` with the library's members. When PCRE2's tables only lack some of
// them (characters of newer Unicode versions), PCRE2's fast \p{..} is kept and the missing
// characters are added; otherwise every range is written out.
void append_category(std::string& out, std::string_view name,
                     const std::vector<unicode::CodePointRange>& library, bool negate, bool in_class) {
  const std::string pcre2_name = (name == "LC" || name == "L&") ? "L&" : std::string(name);
  const auto native = pcre2_category(pcre2_name);
  const bool native_is_subset = !native.empty() && unicode::subtract(native, library).empty();
  if (!native_is_subset || (negate && in_class)) {
    append_set(out, library, negate, in_class);
    return;
  }
  const std::string members = "\\p{" + pcre2_name + "}" + unicode::class_body(unicode::subtract(library, native));
  if (in_class) {
    out += members;
  } else {
    out.append(negate ? "[^" : "[").append(members).append("]");
  }
}

// Per-thread match scratch: match data for one pair of offsets and a JIT stack that lets long
// inputs (a megabyte of whitespace) match without exhausting the default 32 KiB machine stack.
struct MatchScratch {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  MatchScratch() {
    data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~MatchScratch() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

MatchScratch& scratch() {
  thread_local MatchScratch s;
  return s;
}

std::string pcre2_error_text(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof(buffer));
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

std::string translate_oniguruma_pattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 32);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[++i];
      switch (e) {
        case 's': out += kWhiteSpace; break;
        case 'S': out += kNotWhiteSpace; break;
        case 'd':
        case 'D':
          append_category(out, "Nd", *unicode::category("Nd"), e == 'D', in_class);
          break;
        case 'w':
        case 'W':
          // Oniguruma's \w: letters, marks, numbers, connector punctuation.
          if (e == 'W' && in_class) {
            std::vector<unicode::CodePointRange> word;
            for (const char* name : {"L", "M", "N", "Pc"}) {
              const auto part = *unicode::category(name);
              word.insert(word.end(), part.begin(), part.end());
            }
            std::sort(word.begin(), word.end(), [](auto& a, auto& b) { return a.first < b.first; });
            append_set(out, word, true, true);
            break;
          }
          if (!in_class) out += e == 'W' ? "[^" : "[";
          for (const char* name : {"L", "M", "N", "Pc"}) {
            append_category(out, name, *unicode::category(name), false, true);
          }
          if (!in_class) out += "]";
          break;
        case 'p':
        case 'P': {
          // General categories come from the library's own tables; other properties (scripts,
          // binary properties) are left to PCRE2.
          const size_t close = p.find('}', i + 1);
          if (i + 1 < p.size() && p[i + 1] == '{' && close != std::string_view::npos) {
            std::string_view name = p.substr(i + 2, close - i - 2);
            bool negate = e == 'P';
            if (name.starts_with('^')) negate = !negate, name.remove_prefix(1);
            if (auto ranges = unicode::category(name)) {
              append_category(out, name, *ranges, negate, in_class);
              i = close;
              break;
            }
          }
          out.push_back('\\');
          out.push_back(e);
          break;
        }
        case 'h':
          if (in_class) {
            out += kHexChars;
          } else {
            out.append("[").append(kHexChars).append("]");
          }
          break;
        case 'H':
          if (in_class) {
            out += "\\H";
          } else {
            out.append("[^").append(kHexChars).append("]");
          }
          break;
        default:
          out.push_back('\\');
          out.push_back(e);
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out.push_back(c);
      // A ']' right after '[' or '[^' is a literal member.
      if (i + 1 < p.size() && p[i + 1] == '^') out.push_back(p[++i]);
      if (i + 1 < p.size() && p[i + 1] == ']') out += "\\]", ++i;
      continue;
    }
    if (in_class && c == '[' && i + 1 < p.size() && p[i + 1] == ':') {
      // POSIX class [:name:] inside a bracket expression.
      const size_t close = p.find(":]", i + 2);
      if (close != std::string_view::npos) {
        out.append(p.substr(i, close + 2 - i));
        i = close + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out.push_back(c);
  }
  return out;
}

Result<std::shared_ptr<const Regex>> Regex::FromPcre2(std::string_view pattern) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &error_code,
                                   &error_offset, nullptr);
  if (code == nullptr) {
    return Status::Error("regex '" + std::string(pattern) + "' does not compile at offset " +
                         std::to_string(error_offset) + ": " + pcre2_error_text(error_code));
  }
  std::shared_ptr<Regex> regex(new Regex());
  regex->pattern_ = std::string(pattern);
  regex->code_ = code;
  regex->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return std::shared_ptr<const Regex>(std::move(regex));
}

Result<std::shared_ptr<const Regex>> Regex::FromOniguruma(std::string_view pattern) {
  return FromPcre2(translate_oniguruma_pattern(pattern));
}

Result<std::shared_ptr<const Regex>> Regex::FromLiteral(std::string_view text) {
  std::string escaped;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u)) escaped.push_back('\\');
    escaped.push_back(c);
  }
  return FromPcre2(escaped);
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

Status Regex::find_all(std::string_view text, std::vector<Match>& out) const {
  out.clear();
  auto* code = static_cast<pcre2_code*>(code_);
  MatchScratch& s = scratch();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t n = text.size();
  size_t search_from = 0;
  bool has_previous = false;
  size_t previous_end = 0;
  while (search_from <= n) {
    const int rc = jit_ ? pcre2_jit_match(code, subject, n, search_from, 0, s.data, s.context)
                        : pcre2_match(code, subject, n, search_from, PCRE2_NO_UTF_CHECK, s.data,
                                      s.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      return Status::Error("regex '" + pattern_ + "' failed: " + pcre2_error_text(rc));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(s.data);
    const size_t start = ovector[0], end = ovector[1];
    if (start == end && has_previous && previous_end == end) {
      search_from += search_from < n ? utf8::char_length(static_cast<uint8_t>(text[search_from])) : 1;
      continue;
    }
    search_from = end;
    has_previous = true;
    previous_end = end;
    out.push_back({start, end});
  }
  return Status::Ok();
}

}  // namespace deepinfer
