// libFuzzer target for the regex parser: the input up to its first NUL is the pattern, the rest
// the text to match. Bad patterns must give a failed Result; compiled ones run through the
// automaton (grammar_fuzz_util.h checks).
//   build-fuzz/fuzz/fuzz_regex -max_total_time=60
#include <cstdint>
#include <string_view>

#include "grammar_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepinfer::grammar;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view pattern = input.substr(0, nul);
  const std::string_view text = nul == std::string_view::npos ? pattern : input.substr(nul + 1);
  auto g = CompiledGrammar::FromRegex(pattern, fuzz_limits());
  if (g.ok()) walk_checked(g.value(), text);
  return 0;
}
