// integer_range through the JSON Schema bounds that use it, checked exhaustively near the bounds.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "grammar/compiled_grammar.h"
#include "grammar_test_util.h"

namespace deepinfer::grammar {
namespace {

void check_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::string s = R"({"type": "integer")";
  if (lo) s += ", \"minimum\": " + std::to_string(*lo);
  if (hi) s += ", \"maximum\": " + std::to_string(*hi);
  s += "}";
  auto g = CompiledGrammar::FromJsonSchema(s);
  ASSERT_TRUE(g.ok()) << s << ": " << g.status().message();
  GrammarAutomaton a(g->grammar());
  for (int64_t v = -1300; v <= 1300; ++v) {
    const int32_t st = a.walk(a.initial_state(), std::to_string(v));
    const bool in = (!lo || v >= *lo) && (!hi || v <= *hi);
    EXPECT_EQ(st != GrammarAutomaton::kDead && a.accepts(st), in) << s << " at " << v;
  }
  // Non-canonical forms never match.
  for (const char* text : {"00", "-0", "007", "+1"}) {
    const int32_t st = a.walk(a.initial_state(), text);
    EXPECT_FALSE(st != GrammarAutomaton::kDead && a.accepts(st)) << s << " at " << text;
  }
}

TEST(IntegerRange, MatchesExactlyTheRange) {
  const std::vector<std::optional<int64_t>> bounds = {std::nullopt, -1000, -999, -101, -100, -10, -9, -1,
                                                       0, 1, 9, 10, 99, 100, 123, 999, 1000, 1201};
  for (auto lo : bounds) {
    for (auto hi : bounds) {
      if (lo && hi && *lo > *hi) continue;
      check_range(lo, hi);
    }
  }
}

}  // namespace
}  // namespace deepinfer::grammar
