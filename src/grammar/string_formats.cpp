#include "grammar/string_formats.h"

namespace deepinfer::grammar {
namespace {

#define DI_DATE                                                                \
  "[0-9]{4}-(((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01]))|((0[469]|11)-(0[1-9]" \
  "|[12][0-9]|30))|(02-(0[1-9]|1[0-9]|2[0-8])))"
#define DI_TIME "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"

struct Format {
  std::string_view name, regex;
};

constexpr Format kFormats[] = {
    {"date", DI_DATE},
    {"time", DI_TIME},
    {"date-time", DI_DATE "T" DI_TIME},
    {"uuid", "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"},
    {"ipv4", "((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"},
    {"email", "[a-zA-Z0-9_+-]+(\\.[a-zA-Z0-9_+-]+)*@[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(\\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)+"},
    {"hostname", "[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*"},
    {"uri", "https?://[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*(/[a-zA-Z0-9._~-]*)*"},
};

#undef DI_DATE
#undef DI_TIME

}  // namespace

std::optional<std::string_view> format_regex(std::string_view format) {
  for (const Format& f : kFormats) {
    if (f.name == format) return f.regex;
  }
  return std::nullopt;
}

}  // namespace deepinfer::grammar
