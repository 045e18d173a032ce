// Bounded parsing of untrusted JSON (request_json.h): the nesting depth is read from the raw
// bytes (brackets inside strings do not count), deeper bodies are refused before a tree exists,
// and the typed accessors never throw.
#include "server/request_json.h"

#include <gtest/gtest.h>

#include <string>

namespace deepinfer {
namespace {

using json = nlohmann::ordered_json;

std::string nested(int depth, const std::string& inner = "1") {
  return std::string(size_t(depth), '[') + inner + std::string(size_t(depth), ']');
}

TEST(JsonNestingDepth, CountsBracketsOutsideStrings) {
  EXPECT_EQ(json_nesting_depth("1", 64), 0);
  EXPECT_EQ(json_nesting_depth("{}", 64), 1);
  EXPECT_EQ(json_nesting_depth(R"({"a": [1, {"b": []}], "c": {}})", 64), 4);
  EXPECT_EQ(json_nesting_depth(R"({"a": "[[[[{{{{"})", 64), 1);
  EXPECT_EQ(json_nesting_depth(R"({"a": "\"[[[", "b": [[]]})", 64), 3);  // escaped quote stays in the string
  EXPECT_EQ(json_nesting_depth(R"(["\\", [[]]])", 64), 3);               // an escaped backslash ends nothing
  EXPECT_EQ(json_nesting_depth(nested(64), 64), 64);
  EXPECT_EQ(json_nesting_depth(nested(100000), 64), 65);  // stops counting past the limit
}

TEST(ParseUntrustedJson, RefusesDeepBodiesAndKeepsShallowOnes) {
  json out;
  EXPECT_EQ(parse_untrusted_json(nested(64), out), "");
  EXPECT_TRUE(out.is_array());
  const std::string why = parse_untrusted_json("{\"x\":" + nested(50000) + ",\"tokens\":[1]}", out);
  EXPECT_NE(why.find("deeper than 64"), std::string::npos) << why;
  EXPECT_NE(parse_untrusted_json("{\"a\": ", out), "");
  EXPECT_NE(parse_untrusted_json("{\"a\": \"\xff\"}", out).find("not valid JSON"), std::string::npos);
  EXPECT_EQ(parse_untrusted_json("{\"a\": \"[[[[[[[[[[\"}", out, 2), "");
}

TEST(JsonAccessors, AnswerOnlyForTheRightType) {
  const json obj = {{"s", "text"}, {"n", 5}, {"z", nullptr}, {"o", {{"s", "inner"}}}};
  EXPECT_EQ(string_member(obj, "s"), "text");
  EXPECT_EQ(string_member(obj, "n"), std::nullopt);
  EXPECT_EQ(string_member(obj, "z"), std::nullopt);
  EXPECT_EQ(string_member(obj, "missing"), std::nullopt);
  EXPECT_EQ(string_member(json::array({1}), "s"), std::nullopt);
  EXPECT_EQ(string_member(json(5), "s"), std::nullopt);
  ASSERT_NE(find_member(obj, "z"), nullptr);
  EXPECT_TRUE(find_member(obj, "z")->is_null());
  EXPECT_EQ(find_member(json("x"), "z"), nullptr);
  EXPECT_EQ(string_member(*find_member(obj, "o"), "s"), "inner");
}

}  // namespace
}  // namespace deepinfer
