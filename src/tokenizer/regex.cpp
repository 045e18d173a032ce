#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tokenizer/utf8.h"

namespace deepinfer {
namespace {

constexpr std::string_view kWhiteSpace = "\\p{White_Space}";
constexpr std::string_view kNotWhiteSpace = "\\P{White_Space}";
constexpr std::string_view kWordChars = "\\p{L}\\p{M}\\p{N}\\p{Pc}";
constexpr std::string_view kHexChars = "0-9a-fA-F";

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
        case 'd': out += "\\p{Nd}"; break;
        case 'D': out += "\\P{Nd}"; break;
        case 'w':
          if (in_class) {
            out += kWordChars;
          } else {
            out.append("[").append(kWordChars).append("]");
          }
          break;
        case 'W':
          if (in_class) {
            out += "\\W";
          } else {
            out.append("[^").append(kWordChars).append("]");
          }
          break;
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

bool Regex::matches(std::string_view text) const {
  auto* code = static_cast<pcre2_code*>(code_);
  MatchScratch& s = scratch();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const int rc = jit_ ? pcre2_jit_match(code, subject, text.size(), 0, 0, s.data, s.context)
                      : pcre2_match(code, subject, text.size(), 0, PCRE2_NO_UTF_CHECK, s.data,
                                    s.context);
  return rc >= 0;
}

}  // namespace deepinfer
