// Free text up to a marker (grammar/text_until.h), checked against its definition by brute force
// over every short text of a small alphabet, and grammars composed by GrammarBuilder::import.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/grammar_builder.h"
#include "grammar/text_until.h"
#include "grammar_test_util.h"

namespace deepinfer::grammar {
namespace {

// Every text of length <= n over `alphabet`.
std::vector<std::string> all_texts(const std::string& alphabet, size_t n) {
  std::vector<std::string> out{""};
  for (size_t begin = 0, len = 1; len <= n; ++len) {
    const size_t end = out.size();
    for (size_t i = begin; i < end; ++i)
      for (char c : alphabet) out.push_back(out[i] + c);
    begin = end;
  }
  return out;
}

CompiledGrammar text_until(const std::string& marker, bool may_end, const std::string& after,
                           const std::vector<std::string>& forbidden = {}) {
  GrammarBuilder b;
  std::optional<uint32_t> then;
  if (!after.empty()) {
    then = b.declare("after");
    EXPECT_TRUE(b.define(*then, Expr::Literal(after)).ok());
  }
  auto root = define_text_until(b, "text", marker, may_end, then, forbidden);
  EXPECT_TRUE(root.ok()) << root.status().message();
  auto g = b.build(*root);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return CompiledGrammar::FromBuilt(std::move(g).value());
}

TEST(TextUntilTest, MatchesExactlyTheTextsWithoutTheMarkerThenTheContinuation) {
  // Markers with self-overlap, where a naive matcher would miss occurrences.
  for (const std::string marker : {"aab", "abab", "aaa", "ba", "b"}) {
    const CompiledGrammar g = text_until(marker, /*may_end=*/true, "!");
    for (const std::string& t : all_texts("ab!", 7)) {
      const size_t at = t.find(marker);
      const bool expected = at == std::string::npos || t.substr(at + marker.size()) == "!";
      EXPECT_EQ(matches(g, t), expected) << "marker " << marker << " text " << t;
    }
  }
}

TEST(TextUntilTest, ForbiddenTextsOccurOnlyInsideTheMarker) {
  // Forbidden strings inside the marker, overlapping it, and apart from it.
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"abab", {"ba"}}, {"aab", {"b", "!!"}}, {"ab", {"aa", "b!"}}, {"b", {"ab"}}};
  for (const auto& [marker, forbidden] : cases) {
    const CompiledGrammar g = text_until(marker, /*may_end=*/true, "!", forbidden);
    for (const std::string& t : all_texts("ab!", 7)) {
      const size_t at = t.find(marker);
      // Where the forbidden strings may stand: nowhere, or inside the marker's first occurrence.
      const size_t scanned = at == std::string::npos ? t.size() : at + marker.size();
      bool clean = true;
      for (const std::string& f : forbidden)
        for (size_t p = t.find(f); p != std::string::npos && p + f.size() <= scanned; p = t.find(f, p + 1))
          clean = clean && at != std::string::npos && p >= at;
      const bool expected = clean && (at == std::string::npos || t.substr(at + marker.size()) == "!");
      EXPECT_EQ(matches(g, t), expected) << "marker " << marker << " text " << t;
    }
  }
}

TEST(TextUntilTest, WithoutEndingTheMarkerMustCome) {
  const CompiledGrammar g = text_until("<x>", /*may_end=*/false, "y");
  EXPECT_TRUE(matches(g, "ab<<x>y"));
  EXPECT_TRUE(matches(g, "<x>y"));
  EXPECT_FALSE(matches(g, "ab<x"));
  EXPECT_FALSE(matches(g, "ab"));
  EXPECT_FALSE(matches(g, "<x>z"));
  EXPECT_TRUE(is_prefix(g, std::string("\xff\x00<x", 4)));  // any bytes before it
}

TEST(TextUntilTest, WithoutContinuationTheMarkerNeverComes) {
  const CompiledGrammar g = text_until("<x>", /*may_end=*/true, "");
  EXPECT_TRUE(matches(g, "a<x<<>"));
  EXPECT_FALSE(is_prefix(g, "a<x>"));
}

TEST(GrammarImportTest, ComposesGrammarsCompiledApart) {
  auto number = CompiledGrammar::FromRegex("[0-9]+");
  auto word = CompiledGrammar::FromEbnf("root ::= item (\",\" item)*\nitem ::= [a-z]+");
  ASSERT_TRUE(number.ok() && word.ok());
  GrammarBuilder b;
  auto n = b.import(*number->grammar(), "n:");
  auto w = b.import(*word->grammar(), "w:");
  ASSERT_TRUE(n.ok() && w.ok());
  const uint32_t root = b.declare("root");
  ASSERT_TRUE(b.define(root, Expr::Seq({Expr::Ref(*n), Expr::Literal("="), Expr::Ref(*w)})).ok());
  auto g = b.build(root);
  ASSERT_TRUE(g.ok()) << g.status().message();
  const CompiledGrammar c = CompiledGrammar::FromBuilt(std::move(g).value());
  EXPECT_TRUE(matches(c, "12=ab,c"));
  EXPECT_FALSE(matches(c, "12=ab,"));
  EXPECT_FALSE(matches(c, "x=ab"));
  // A second import under the same prefix would define its rules twice.
  auto again = b.import(*number->grammar(), "n:");
  EXPECT_FALSE(again.ok());
}

}  // namespace
}  // namespace deepinfer::grammar
