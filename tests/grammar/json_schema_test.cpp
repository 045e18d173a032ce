#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "grammar/compiled_grammar.h"
#include "grammar/json_schema_compiler.h"
#include "grammar_test_util.h"

namespace deepinfer::grammar {
namespace {

CompiledGrammar schema(std::string_view text, JsonSchemaOptions options = {}) {
  auto g = CompiledGrammar::FromJsonSchema(text, options);
  EXPECT_TRUE(g.ok()) << text << ": " << g.status().message();
  return std::move(g).value();
}

std::string schema_error(std::string_view text) {
  auto g = CompiledGrammar::FromJsonSchema(text);
  EXPECT_FALSE(g.ok()) << text;
  return g.ok() ? "" : g.status().message();
}

struct Case {
  const char* schema;
  std::vector<const char*> yes, no;
};

void check(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    const CompiledGrammar g = schema(c.schema);
    for (const char* s : c.yes) EXPECT_TRUE(matches(g, s)) << c.schema << " ~ " << s;
    for (const char* s : c.no) EXPECT_FALSE(matches(g, s)) << c.schema << " !~ " << s;
  }
}

TEST(JsonSchema, ScalarTypes) {
  check({
      {R"({"type": "null"})", {"null"}, {"nul", "0"}},
      {R"({"type": "boolean"})", {"true", "false"}, {"True"}},
      {R"({"type": "integer"})", {"0", "-7", "123", "12345678901234567890"},
       {"01", "-0", "1.5", "1e3", "123456789012345678901"}},
      {R"({"type": "number"})", {"0", "-0.5", "1e10", "2.5E-3", "1e999"}, {"01", ".5", "1.", "+1", "1e1000"}},
      {R"({"type": "integer", "minimum": 5})", {"5", "99999999999999999999"}, {"999999999999999999999"}},
      {R"({"type": "string"})", {R"("")", R"("a\"b\\c\u00e9\n")", "\"\xc3\xa9\""},
       {R"("a)", "\"a\nb\"", R"("\ud800")", R"("\x")"}},
      {R"({"type": ["string", "null"]})", {"null", R"("x")"}, {"1"}},
      {R"(true)", {"1", "[]", R"({"a": [null]})"}, {"[", "{\"a\" :1}"}},
  });
}

TEST(JsonSchema, Strings) {
  check({
      {R"({"type": "string", "minLength": 2, "maxLength": 3})", {R"("ab")", R"("a\nc")", "\"\xc3\xa9\xc3\xa9\""},
       {R"("a")", R"("abcd")"}},
      {R"({"type": "string", "pattern": "^[a-z]+\"?$"})", {R"("abc")", R"("ab\"")"}, {R"("ab"")", R"("A")"}},
      {R"({"type": "string", "format": "date"})", {R"("2024-02-28")", R"("1999-12-31")"},
       {R"("2024-02-30")", R"("2024-13-01")", R"("2024-04-31")"}},
      {R"({"type": "string", "format": "uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123")"}},
      {R"({"type": "string", "format": "ipv4"})", {R"("192.168.0.1")"}, {R"("256.1.1.1")", R"("01.1.1.1")"}},
  });
}

TEST(JsonSchema, NumberBounds) {
  check({
      {R"({"type": "integer", "minimum": -5, "exclusiveMaximum": 20})", {"-5", "0", "19"}, {"-6", "20", "100"}},
      {R"({"type": "integer", "minimum": 18})", {"18", "99", "100", "123456"}, {"17", "5", "-18"}},
      {R"({"type": "integer", "maximum": -3})", {"-3", "-40"}, {"-2", "0", "3"}},
      {R"({"type": "number", "minimum": 0, "maximum": 1})", {"0", "1", "0.5", "0.999"}, {"-0.5", "1.5", "1.0", "2"}},
      {R"({"type": "number", "exclusiveMinimum": -2, "maximum": 3})", {"-1.5", "-1", "3", "2.75"}, {"-2", "-2.5", "3.5"}},
      {R"({"type": "integer", "minimum": 1.5, "maximum": 3.5})", {"2", "3"}, {"1", "4"}},
  });
}

TEST(JsonSchema, Objects) {
  check({
      {R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["b"]})",
       {R"({"b":"x"})", R"({"a":1,"b":"x"})", R"({"a": 1, "b": "x"})"},
       {R"({"a":1})", R"({"b":"x","a":1})", R"({})", R"({"b":"x","c":1})", R"({ "b":"x"})"}},
      {R"({"type": "object"})", {R"({})", R"({"k":[1,{"z":null}]})"}, {R"([])"}},
      {R"({"properties": {"a": {"const": 1}}, "additionalProperties": {"type": "boolean"}})",
       {R"({"a":1,"b":true,"ab":false})", R"({"x":true})", R"({})"}, {R"({"a":1,"a":true})", R"({"b":1})"}},
      {R"({"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "minProperties": 2})",
       {R"({"a":1,"b":2})", R"({"a":1,"b":2,"c":3})"}, {R"({"a":1})"}},
      {R"({"type": "object", "properties": {"a": {}, "b": {}}, "maxProperties": 1})", {R"({"a":1})", R"({})"},
       {R"({"a":1,"b":2})"}},
  });
}

TEST(JsonSchema, Arrays) {
  check({
      {R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})",
       {"[1]", "[1,2,3]", "[1, 2]"}, {"[]", "[1,2,3,4]", "[1,]", "[\"a\"]"}},
      {R"({"type": "array"})", {"[]", "[1,\"a\",null]"}, {"[,]"}},
      {R"({"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false})",
       {R"(["a",1])"}, {R"(["a"])", R"(["a",1,2])"}},
      {R"({"type": "array", "items": [{"type": "null"}], "additionalItems": {"type": "boolean"}, "minItems": 2})",
       {"[null,true]", "[null,true,false]"}, {"[null]", "[true,true]"}},
  });
}

TEST(JsonSchema, CombinatorsAndRefs) {
  check({
      {R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]})", {"1", R"("a")"}, {R"("ab")"}},
      {R"({"oneOf": [{"type": "integer"}, {"type": "boolean"}]})", {"1", "true"}, {"null"}},
      {R"({"oneOf": [{"properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind", "x"]},
                     {"properties": {"kind": {"const": "b"}}, "required": ["kind"]}],
          "type": "object"})",
       {R"({"kind":"a","x":1})", R"({"kind":"b"})"}, {R"({"kind":"a"})", R"({"kind":"c"})"}},
      {R"({"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                     {"properties": {"b": {"type": "string"}}, "required": ["b"]}]})",
       {R"({"a":1,"b":"x"})"}, {R"({"a":1})"}},
      {R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                                               "next": {"$ref": "#/$defs/node"}},
                              "required": ["v"]}},
          "$ref": "#/$defs/node"})",
       {R"({"v":1})", R"({"v":1,"next":{"v":2,"next":{"v":3}}})"}, {R"({"v":1,"next":{}})"}},
      {R"({"definitions": {"a~b": {"enum": ["x", 2, null]}}, "items": {"$ref": "#/definitions/a~0b"}})",
       {R"(["x",2,null])"}, {R"(["y"])"}},
      {R"({"$ref": "#/$defs/s", "maxLength": 2, "$defs": {"s": {"type": "string", "minLength": 1}}})",
       {R"("a")", R"("ab")"}, {R"("")", R"("abc")"}},
  });
}

TEST(JsonSchema, CompactOutputOption) {
  JsonSchemaOptions compact;
  compact.separator_space = false;
  const CompiledGrammar g = schema(R"({"type": "array", "items": {"type": "integer"}})", compact);
  EXPECT_TRUE(matches(g, "[1,2]"));
  EXPECT_FALSE(matches(g, "[1, 2]"));
}

TEST(JsonSchema, AnyJsonObject) {
  const CompiledGrammar g = CompiledGrammar::AnyJsonObject();
  EXPECT_TRUE(matches(g, R"({"a": [1, 2.5, "x", true, null, {}]})"));
  EXPECT_FALSE(matches(g, R"([1])"));
  EXPECT_FALSE(matches(g, R"("x")"));
}

TEST(JsonSchema, KeywordsOfNoDraftAreAnnotations) {
  // Validators ignore them, so outputs valid without them are valid with them.
  check({{R"({"type": "integer", "x-unit": "ms", "nullable": true, "example": 3, "title": "t"})", {"3"}, {"null"}}});
}

TEST(JsonSchema, PatternPropertiesAloneGiveAtMostOneMatchingMember) {
  check({{R"({"type": "object", "patternProperties": {"^x-[a-z]{1,3}$": {"type": "integer"}},
             "additionalProperties": false})",
          {"{}", "{\"x-ab\": 3}", "{\"x-a\":-1}"},
          {"{\"y-ab\": 3}", "{\"x-ab\": \"3\"}", "{\"x-abcd\": 3}", "{\"x-a\": 1, \"x-b\": 2}"}}});
}

TEST(JsonSchema, UnsupportedKeywordsAreNamed) {
  EXPECT_NE(schema_error(R"({"type": "object", "patternProperties": {"^a": {}}, "properties": {"b": {}}})")
                .find("'patternProperties' at # is supported only as one pattern"), std::string::npos);
  EXPECT_NE(schema_error(R"({"properties": {"x": {"not": {"type": "null"}}}})")
                .find("'not' at #/properties/x"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type": "array", "uniqueItems": true})").find("'uniqueItems'"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type": "number", "multipleOf": 0.5})").find("'multipleOf'"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type": "number", "maximum": 0.5})").find("non-integer bound 'maximum'"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type": "string", "format": "color"})").find("unsupported 'format' 'color'"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type": "string", "pattern": "(a)\\1"})").find("backreferences"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type": "string", "pattern": "a", "maxLength": 3})").find("only one of"), std::string::npos);
  EXPECT_NE(schema_error(R"({"$ref": "http://example.com/s.json"})").find("only local references"), std::string::npos);
  EXPECT_NE(schema_error(R"({"$ref": "#/$defs/missing"})").find("points to nothing"), std::string::npos);
  EXPECT_NE(schema_error(R"({"oneOf": [{"type": "integer"}, {"minimum": 3}]})").find("may overlap"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type": "frog"})").find("'type'"), std::string::npos);
  EXPECT_NE(schema_error(R"({"enum": [1], "minimum": 0})").find("'minimum' alongside"), std::string::npos);
  EXPECT_NE(schema_error("false").find("admits no value"), std::string::npos);
  EXPECT_NE(schema_error("{").find("not valid JSON"), std::string::npos);
}

TEST(JsonSchema, CompilesStayBounded) {
  // Large bounds nest as helper rules, never as copies: each compiles small and fast.
  EXPECT_TRUE(CompiledGrammar::FromJsonSchema(R"({"type": "array", "maxItems": 5000, "items":
      {"type": "array", "maxItems": 5000, "items": {"type": "string", "maxLength": 5000}}})").ok());
  EXPECT_NE(schema_error(R"({"type": "string", "maxLength": 100000})").find("exceeds the limit"), std::string::npos);
  std::string deep = R"({"type": "string"})";
  for (int i = 0; i < 100; ++i) deep = R"({"type": "array", "items": )" + deep + "}";
  EXPECT_NE(schema_error(deep).find("nested too deeply"), std::string::npos);
  JsonSchemaOptions small;
  small.limits.max_elements = 2000;
  auto big = CompiledGrammar::FromJsonSchema(R"({"type": "string", "maxLength": 5000})", small);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("grammar too large"), std::string::npos);
}

TEST(JsonSchema, InfiniteRefLoopsFail) {
  EXPECT_NE(schema_error(R"({"$ref": "#", "type": "object"})").find("nested too deeply"), std::string::npos);
  EXPECT_NE(schema_error(R"({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})").find("matches no text"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}, "minItems": 1}},
                             "$ref": "#/$defs/a"})").find("matches no text"), std::string::npos);
}

}  // namespace
}  // namespace deepinfer::grammar

namespace deepinfer::grammar {
namespace {

// escape_less_than: the same JSON values, with every '<' inside strings written \u003c, so the
// text never holds '<' (tool-call arguments inside markup).
TEST(JsonSchema, EscapeLessThanKeepsValuesAndNeverWritesLessThan) {
  JsonSchemaOptions options;
  options.escape_less_than = true;
  const CompiledGrammar g = schema(R"({"type": "object", "properties": {
      "free": {"type": "string"}, "pat": {"type": "string", "pattern": "^<[a-z]>$"},
      "e": {"enum": ["<b>", 1]}, "bounded": {"type": "string", "maxLength": 2}},
      "required": ["free", "pat", "e", "bounded"], "additionalProperties": false})",
                                   options);
  EXPECT_TRUE(matches(g, R"({"free":"a\u003cb","pat":"\u003cq>","e":"\u003cb>","bounded":"\u003c\u003c"})"));
  EXPECT_FALSE(matches(g, R"({"free":"a<b","pat":"\u003cq>","e":"\u003cb>","bounded":"x"})"));
  EXPECT_FALSE(matches(g, R"({"free":"a","pat":"<q>","e":"\u003cb>","bounded":"x"})"));
  EXPECT_FALSE(matches(g, R"({"free":"a","pat":"\u003cq>","e":"<b>","bounded":"x"})"));
  EXPECT_FALSE(matches(g, R"({"free":"a","pat":"\u003cq>","e":1,"bounded":"<"})"));
  const CompiledGrammar plain = schema(R"({"type": "string", "pattern": "^<[a-z]>$"})");
  EXPECT_TRUE(matches(plain, R"("<q>")"));
  const CompiledGrammar any = CompiledGrammar::AnyJsonObject(options);
  EXPECT_TRUE(matches(any, R"({"<":"x"})") == false);
  EXPECT_TRUE(matches(any, R"({"\u003c":"x"})"));
  // A property name with '<' cannot be told apart from other keys by this compiler's key trie.
  options.escape_less_than = true;
  auto bad = CompiledGrammar::FromJsonSchema(
      R"({"type": "object", "properties": {"a<b": {"type": "integer"}}, "additionalProperties": {"type": "integer"}})",
      options);
  EXPECT_FALSE(bad.ok());
}

TEST(JsonSchema, ObjectMembersOneByOneWithRawStrings) {
  JsonSchemaOptions options;
  options.escaped_code_points = {{0xFF5C, 0xFF5C}};  // the fullwidth bar
  auto members = compile_object_members(nlohmann::ordered_json::parse(R"({
    "allOf": [{"properties": {"a": {"type": "string", "pattern": "^[x｜]+$"}}, "required": ["a"]}],
    "properties": {"b": {"enum": ["q\"r", "s｜t"]}, "c": {"type": ["string", "null"], "maxLength": 2},
                   "d": {"$ref": "#/$defs/n"}},
    "$defs": {"n": {"type": "integer"}}})"),
                                        options);
  ASSERT_TRUE(members.ok()) << members.status().message();
  ASSERT_EQ(members->size(), 4u);
  const auto grammar_of = [](const std::optional<Grammar>& g) { return CompiledGrammar::FromBuilt(Grammar(*g)); };
  // Declared order after allOf's merge; raw strings without the escaped code point.
  EXPECT_EQ((*members)[0].name, "b");
  EXPECT_EQ((*members)[3].name, "a");
  EXPECT_TRUE((*members)[3].required);
  EXPECT_FALSE((*members)[0].required);
  ASSERT_TRUE((*members)[3].raw_string && !(*members)[3].json_value);  // strings only: raw alone
  EXPECT_TRUE(matches(grammar_of((*members)[3].raw_string), "xx"));
  EXPECT_FALSE(matches(grammar_of((*members)[3].raw_string), "x｜"));
  ASSERT_TRUE((*members)[0].raw_string && !(*members)[0].json_value);
  EXPECT_TRUE(matches(grammar_of((*members)[0].raw_string), "q\"r"));  // raw: unquoted, unescaped
  EXPECT_FALSE(matches(grammar_of((*members)[0].raw_string), "s｜t"));
  // A string or null: the string raw, the value as JSON too (its strings escape the bar).
  ASSERT_TRUE((*members)[1].raw_string && (*members)[1].json_value);
  EXPECT_TRUE(matches(grammar_of((*members)[1].raw_string), "ab"));
  EXPECT_FALSE(matches(grammar_of((*members)[1].raw_string), "abc"));
  EXPECT_TRUE(matches(grammar_of((*members)[1].json_value), "null"));
  EXPECT_TRUE(matches(grammar_of((*members)[1].json_value), "\"\\uff5c\""));
  EXPECT_FALSE(matches(grammar_of((*members)[1].json_value), "\"｜\""));
  // An integer: JSON only, its $ref resolved against the whole schema.
  ASSERT_TRUE(!(*members)[2].raw_string && (*members)[2].json_value);
  EXPECT_TRUE(matches(grammar_of((*members)[2].json_value), "-12"));
  // Members that cannot be listed one by one fail naming the keyword.
  for (const char* bad : {R"({"type": "object"})", R"({"properties": {"a": {}}, "additionalProperties": {}})",
                          R"({"anyOf": [{"type": "object"}]})"}) {
    auto m = compile_object_members(nlohmann::ordered_json::parse(bad), options);
    ASSERT_FALSE(m.ok()) << bad;
    EXPECT_TRUE(m.status().message().find("'additionalProperties'") != std::string::npos ||
                m.status().message().find("'anyOf'") != std::string::npos)
        << m.status().message();
  }
}

}  // namespace
}  // namespace deepinfer::grammar
