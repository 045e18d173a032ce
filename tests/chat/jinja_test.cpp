// Jinja engine unit tests. Expected strings are what Jinja2 3.1.4 renders for the same template
// with transformers' environment (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks):
// reference/jinja_snippets.jsonl is written by tests/chat/make_reference.py; the literals below
// were checked with .venv/bin/python the same way when the test was written.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "chat/jinja_template.h"

namespace deepinfer::chat::jinja {
namespace {

std::string render(const std::string& source, const ValueDict& vars = {}) {
  auto t = Template::Parse(source);
  if (!t.ok()) return "PARSE ERROR: " + t.status().message();
  auto r = t->render(vars);
  if (!r.ok()) return "RENDER ERROR: " + r.status().message();
  return *r;
}

TEST(Jinja, LoopScopes) {
  EXPECT_EQ(render("{% set x = 0 %}{% for i in [1,2,3] %}{{ x }}{% set x = i %}{{ x }}|{% endfor %}{{ x }}"),
            "01|02|03|0");
  EXPECT_EQ(render("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");
  EXPECT_EQ(render("{% macro m() %}{{ z }}{% endmacro %}{% set z = 3 %}{{ m() }}"), "3");
}

TEST(Jinja, PythonReprs) {
  EXPECT_EQ(render("{{ [1,2] }}{{ {\"a\": [1, \"b\", none, true, 1.5]} }}{{ (1,2) }}{{ (1,) }}"),
            "[1, 2]{'a': [1, 'b', None, True, 1.5]}(1, 2)(1,)");
  EXPECT_EQ(render("{{ 1e16 }} {{ 1e15 }} {{ 0.1+0.2 }} {{ 1e-5 }} {{ 3/2 }} {{ 4/2 }} {{ -7//2 }} {{ -7 % 3 }} "
                   "{{ 2**10 }} {{ 2**-1 }}"),
            "1e+16 1000000000000000.0 0.30000000000000004 1e-05 1.5 2.0 -4 2 1024 0.5");
}

TEST(Jinja, MatchesJinja2OnFeatureSnippets) {
  std::ifstream in("tests/data/chat/reference/jinja_snippets.jsonl");
  ASSERT_TRUE(in.good());
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    const auto row = nlohmann::ordered_json::parse(line);
    const std::string source = row["template"].get<std::string>();
    ValueDict vars;
    for (const auto& [k, v] : row["vars"].items()) vars.set(k, Value::FromJson(v));
    auto t = Template::Parse(source);
    ASSERT_TRUE(t.ok()) << source << "\n" << t.status().message();
    auto out = t->render(vars);
    if (row.contains("error")) {
      EXPECT_FALSE(out.ok()) << source << "\nJinja2 raised " << row["error"] << ", we rendered " << *out;
    } else {
      ASSERT_TRUE(out.ok()) << source << "\n" << out.status().message();
      EXPECT_EQ(*out, row["rendered"].get<std::string>()) << source;
    }
    ++n;
  }
  EXPECT_GT(n, 70);
}

TEST(Jinja, RaisedMessagesReachTheStatus) {
  EXPECT_EQ(render("{{ raise_exception('Conversation roles must alternate') }}"),
            "RENDER ERROR: chat template error: Conversation roles must alternate");
  EXPECT_EQ(render("{{ x.y }}"), "RENDER ERROR: chat template error: 'x' is undefined");
}

// Constructs the engine does not implement fail at parse time, naming the construct, even inside
// a branch that a given conversation would never reach.
TEST(Jinja, UnsupportedConstructsFailAtLoadNamingThem) {
  struct Bad {
    const char* source;
    const char* names;
  };
  const Bad cases[] = {
      {"{% if false %}{{ x | frobnicate }}{% endif %}", "unsupported filter 'frobnicate'"},
      {"{{ x is frobnicated }}", "unsupported test 'frobnicated'"},
      {"{{ x.frobnicate() }}", "unsupported method 'frobnicate'"},
      {"{{ frobnicate(1) }}", "unsupported function 'frobnicate'"},
      {"{% include 'other.jinja' %}", "unsupported construct: {% include %}"},
      {"{% extends 'base' %}", "unsupported construct: {% extends %}"},
      {"{% import 'm' as m %}", "unsupported construct: {% import %}"},
      {"{% for x in xs recursive %}{{ loop(x) }}{% endfor %}", "unsupported construct: recursive for loops"},
      {"{{ '%s' % x }}", "printf-style string formatting"},
      {"{{ f(*args) }}", "*args and **kwargs"},
      {"{% if x %}unclosed", "missing {% endif %}"},
      {"{{ x ", "unterminated {{ expression"},
      {"{% frob %}", "unknown tag 'frob'"},
      {"{% break %}", "'break' outside a for loop"},
  };
  for (const Bad& b : cases) {
    auto t = Template::Parse(b.source);
    ASSERT_FALSE(t.ok()) << b.source;
    EXPECT_NE(t.status().message().find(b.names), std::string::npos) << b.source << ": " << t.status().message();
  }
}

TEST(Jinja, ConcurrentRendersOfOneTemplate) {
  auto t = Template::Parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{{ m }}{% endfor %}{{ ns.n }}");
  ASSERT_TRUE(t.ok());
  std::vector<std::thread> threads;
  std::vector<std::string> results(8);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      ValueList msgs;
      for (int k = 0; k <= i; ++k) msgs.push_back(Value::Int(k));
      ValueDict vars;
      vars.set("messages", Value::List(msgs));
      for (int rep = 0; rep < 200; ++rep) results[i] = *t->render(vars);
    });
  }
  for (auto& th : threads) th.join();
  for (int i = 0; i < 8; ++i) {
    std::string expected;
    for (int k = 0; k <= i; ++k) expected += std::to_string(k);
    EXPECT_EQ(results[i], expected + std::to_string(i + 1));
  }
}

}  // namespace
}  // namespace deepinfer::chat::jinja
