// libFuzzer target for the grammar text parser: arbitrary bytes as EBNF text (docs/grammar.md).
// Bad text must give a failed Result, never a crash or a hang; a grammar that compiles is then
// run on the same bytes through the automaton (grammar_fuzz_util.h checks).
//   build-fuzz/fuzz/fuzz_grammar_ebnf -max_total_time=60
#include <cstdint>
#include <string_view>

#include "grammar_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepinfer::grammar;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto g = CompiledGrammar::FromEbnf(text, fuzz_limits());
  if (g.ok()) walk_checked(g.value(), text);
  return 0;
}
