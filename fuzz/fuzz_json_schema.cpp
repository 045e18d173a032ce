// libFuzzer target for the JSON Schema compiler: arbitrary bytes as schema text (seed it with
// tests/grammar/corpus schemas). Invalid JSON, unsupported keywords, bad refs and oversized
// schemas must give a failed Result naming the problem, never a crash or a hang; a compiled
// schema runs through the automaton on the same bytes (grammar_fuzz_util.h checks).
//   build-fuzz/fuzz/fuzz_json_schema -max_total_time=60
#include <cstdint>
#include <string_view>

#include "grammar_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepinfer::grammar;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  JsonSchemaOptions options;
  options.limits = fuzz_limits();
  options.max_schema_depth = 16;
  auto g = CompiledGrammar::FromJsonSchema(text, options);
  if (g.ok()) {
    walk_checked(g.value(), text);
  } else {
    DI_CHECK(!g.status().message().empty());
  }
  return 0;
}
