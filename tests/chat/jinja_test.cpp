// Jinja engine unit tests. Expected strings are what Jinja2 3.1.4 renders for the same template
// with transformers' environment (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks),
// checked with .venv/bin/python when the test was written.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace deepinfer::chat::jinja
