#include <gtest/gtest.h>

#include "grammar/compiled_grammar.h"
#include "grammar_test_util.h"

namespace deepinfer::grammar {
namespace {

CompiledGrammar regex(std::string_view pattern) {
  auto g = CompiledGrammar::FromRegex(pattern);
  EXPECT_TRUE(g.ok()) << pattern << ": " << g.status().message();
  return std::move(g).value();
}

std::string regex_error(std::string_view pattern) {
  auto g = CompiledGrammar::FromRegex(pattern);
  EXPECT_FALSE(g.ok()) << pattern;
  return g.ok() ? "" : g.status().message();
}

struct Case {
  const char* pattern;
  std::vector<const char*> yes, no;
};

TEST(Regex, WholeTextMatching) {
  const std::vector<Case> cases = {
      {"abc", {"abc"}, {"ab", "abcd", "xabc"}},
      {"^abc$", {"abc"}, {"abcabc"}},
      {"a|b|^c$", {"a", "b", "c"}, {"ab", ""}},
      {"(ab)+c?", {"ab", "ababc"}, {"abc c", "a", "c"}},
      {"[a-c]{2,3}", {"ab", "abc"}, {"a", "abca"}},
      {"x{3}", {"xxx"}, {"xx", "xxxx"}},
      {"x{2,}", {"xx", "xxxxx"}, {"x"}},
      {"x{,3}", {"x{,3}"}, {"x"}},  // not a quantifier: literal text
      {"\\d+\\.\\d*", {"12.", "0.5"}, {".5", "a.1"}},
      {"[^0-9\\s]+", {"abc", "\xc3\xa9"}, {"a1", "a b"}},
      {"\\w+@\\w+\\.com", {"me@x.com"}, {"me@x.org"}},
      {"(?:a|bc)*?d", {"d", "abcad"}, {"ab"}},
      {"(?<year>\\d{4})-(\\d{2})", {"2024-01"}, {"24-01"}},
      {".", {"a", "\xe2\x82\xac"}, {"\n", "ab"}},
      {"[\\]\\-a]+", {"]-a"}, {"b"}},
      {"\\u00e9\\x41", {"\xc3\xa9" "A"}, {"eA"}},
      {"[]a]", {"]", "a"}, {"b"}},
      {"a\\*\\+\\?\\(\\)", {"a*+?()"}, {"a"}},
      {"", {""}, {"a"}},
  };
  for (const Case& c : cases) {
    const CompiledGrammar g = regex(c.pattern);
    for (const char* s : c.yes) EXPECT_TRUE(matches(g, s)) << c.pattern << " ~ " << s;
    for (const char* s : c.no) EXPECT_FALSE(matches(g, s)) << c.pattern << " !~ " << s;
  }
}

TEST(Regex, PathologicalPatternsStayLinear) {
  // Exponential for a backtracking engine; here the DFA states stay few.
  const CompiledGrammar g = regex("(a|a)*(a*)*b");
  std::string text(5000, 'a');
  EXPECT_FALSE(matches(g, text));
  EXPECT_TRUE(matches(g, text + "b"));
  GrammarAutomaton a(g.grammar());
  a.walk(a.initial_state(), text);
  EXPECT_LT(a.n_states(), 10u);
}

TEST(Regex, UnsupportedConstructsAreNamed) {
  EXPECT_NE(regex_error("(a)\\1").find("backreferences"), std::string::npos);
  EXPECT_NE(regex_error("a(?=b)").find("lookaround"), std::string::npos);
  EXPECT_NE(regex_error("\\bword").find("word boundary"), std::string::npos);
  EXPECT_NE(regex_error("\\p{L}").find("Unicode property"), std::string::npos);
  EXPECT_NE(regex_error("a^b").find("'^'"), std::string::npos);
  EXPECT_NE(regex_error("a$b").find("'$'"), std::string::npos);
  EXPECT_NE(regex_error("a**").find("nested quantifier"), std::string::npos);
  EXPECT_NE(regex_error("a++").find("possessive"), std::string::npos);
  EXPECT_NE(regex_error("*a").find("without an operand"), std::string::npos);
  EXPECT_NE(regex_error("(ab").find("expected ')'"), std::string::npos);
  EXPECT_NE(regex_error("ab)").find("unbalanced"), std::string::npos);
  EXPECT_NE(regex_error("[ab").find("unterminated"), std::string::npos);
  EXPECT_NE(regex_error("[z-a]").find("out of order"), std::string::npos);
  EXPECT_NE(regex_error("a{99999}").find("exceeds the limit"), std::string::npos);
  EXPECT_NE(regex_error("\\q").find("unknown escape"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::grammar
