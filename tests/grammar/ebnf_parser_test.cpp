#include <gtest/gtest.h>

#include "grammar/compiled_grammar.h"
#include "grammar_test_util.h"

namespace deepinfer::grammar {
namespace {

CompiledGrammar ebnf(std::string_view text) {
  auto g = CompiledGrammar::FromEbnf(text);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return std::move(g).value();
}

std::string ebnf_error(std::string_view text) {
  auto g = CompiledGrammar::FromEbnf(text);
  EXPECT_FALSE(g.ok());
  return g.ok() ? "" : g.status().message();
}

TEST(Ebnf, LiteralsAlternativesAndGroups) {
  const CompiledGrammar g = ebnf(R"(
    # a comment
    root ::= greeting (", " name)? "!"
    greeting ::= "hello" | "hi"
    name ::= [A-Z] [a-z]*
  )");
  EXPECT_TRUE(matches(g, "hello!"));
  EXPECT_TRUE(matches(g, "hi, Bob!"));
  EXPECT_FALSE(matches(g, "hi, bob!"));
  EXPECT_FALSE(matches(g, "hello"));
  EXPECT_TRUE(is_prefix(g, "hello"));
  EXPECT_FALSE(is_prefix(g, "hey"));
}

TEST(Ebnf, Quantifiers) {
  const CompiledGrammar g = ebnf(R"(root ::= "a"{2,3} "b"+ "c"? "d"{2} "e"{1,})");
  EXPECT_TRUE(matches(g, "aabdde"));
  EXPECT_TRUE(matches(g, "aaabbbcddeee"));
  EXPECT_FALSE(matches(g, "abdde"));
  EXPECT_FALSE(matches(g, "aaaabdde"));
  EXPECT_FALSE(matches(g, "aabde"));
  EXPECT_FALSE(matches(g, "aabdd"));
}

TEST(Ebnf, ClassesEscapesAndUnicode) {
  const CompiledGrammar g = ebnf(R"(root ::= [^a-z\n] "\u00e9\t" [α-ω]+ .)");
  EXPECT_TRUE(matches(g, "X\xc3\xa9\tαβ€"));
  EXPECT_FALSE(matches(g, "x\xc3\xa9\tαβ€"));
  EXPECT_FALSE(matches(g, "\n\xc3\xa9\tαβ€"));
  EXPECT_TRUE(matches(g, "\xe4\xb8\xad\xc3\xa9\tω\xf0\x9f\x98\x80"));
  // Invalid UTF-8 never matches a character class.
  EXPECT_FALSE(is_prefix(g, "\xc3("));
  EXPECT_FALSE(is_prefix(g, "\xed\xa0\x80"));  // a surrogate
}

TEST(Ebnf, RecursionAndNullableLoops) {
  const CompiledGrammar g = ebnf(R"(
    root ::= list
    list ::= "[" (item ("," item)*)? "]"
    item ::= list | [0-9]+
  )");
  EXPECT_TRUE(matches(g, "[]"));
  EXPECT_TRUE(matches(g, "[1,[2,[]],[[3]]]"));
  EXPECT_FALSE(matches(g, "[1,]"));
  EXPECT_FALSE(matches(g, "[[1]"));
  // A repetition of a nullable item terminates (tail references do not grow the stack).
  const CompiledGrammar loop = ebnf(R"(root ::= ("a"*)* "b")");
  EXPECT_TRUE(matches(loop, "b"));
  EXPECT_TRUE(matches(loop, "aaab"));
}

TEST(Ebnf, RejectsLeftRecursion) {
  EXPECT_NE(ebnf_error("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(ebnf_error("root ::= x \"a\"\nx ::= y? root\ny ::= \"b\"").find("left-recursive"), std::string::npos);
}

TEST(Ebnf, ErrorsNameTheProblem) {
  EXPECT_NE(ebnf_error("").find("empty"), std::string::npos);
  EXPECT_NE(ebnf_error("start ::= \"a\"").find("no rule 'root'"), std::string::npos);
  EXPECT_NE(ebnf_error("root ::= undefined").find("'undefined' is used but not defined"), std::string::npos);
  EXPECT_NE(ebnf_error("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(ebnf_error("root ::= \"abc").find("line 1 column 14: unterminated string"), std::string::npos);
  EXPECT_NE(ebnf_error("root ::= ( \"a\"").find("expected ')'"), std::string::npos);
  EXPECT_NE(ebnf_error("root ::= \"a\" )").find("unbalanced"), std::string::npos);
  EXPECT_NE(ebnf_error("root ::= [b-a]").find("out of order"), std::string::npos);
  EXPECT_NE(ebnf_error("root ::= \"a\"{3,2}").find("max < min"), std::string::npos);
  EXPECT_NE(ebnf_error("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
}

TEST(Ebnf, LimitsBoundTheCompile) {
  GrammarLimits limits;
  limits.max_repeat = 100;
  auto big = CompiledGrammar::FromEbnf("root ::= \"a\"{1000}", limits);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("exceeds the limit 100"), std::string::npos);
  limits = {};
  limits.max_elements = 40;
  auto many = CompiledGrammar::FromEbnf("root ::= (\"ab\"{50}){50}", limits);
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.status().message().find("grammar too large"), std::string::npos);
  limits = {};
  limits.max_nesting = 10;
  auto deep = CompiledGrammar::FromEbnf("root ::= " + std::string(20, '(') + "\"a\"" + std::string(20, ')'), limits);
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("nested too deeply"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::grammar
