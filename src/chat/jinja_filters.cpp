// Filters and tests (jinja_builtins.h), with Jinja2 3.1's defaults and transformers' `tojson`.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>

#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"
#include "chat/py_string.h"

namespace deepinfer::chat::jinja {
namespace {

using FilterFn = std::function<Value(const Value&, CallArgs&)>;
using TestFn = std::function<bool(const Value&, CallArgs&)>;

[[noreturn]] void error(const std::string& message) { throw RenderError(message); }

std::optional<std::string> attribute_param(const Params& p, size_t i) {
  if (!p.has(i) || p.get(i).is_none()) return std::nullopt;
  return p.get(i).str();
}

// Jinja's case-insensitive key: strings lowered unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::String(py::lower(v.as_string()));
  return v;
}

// A filter's string result keeps its input's safe mark, as markupsafe's str methods do.
Value same_kind(const Value& input, std::string s) {
  return input.is_markup() ? Value::Markup(std::move(s)) : Value::String(std::move(s));
}

Value item_or_path(const Value& v, const std::optional<std::string>& attribute) {
  return attribute ? get_path(v, *attribute) : v;
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(py::count_code_points(v.as_string()));
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      return static_cast<int64_t>(v.as_list().size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.as_dict().size());
    default:
      error("object of type '" + v.type_name() + "' has no len()");
  }
}

// Python's int(str) / float(str) as Jinja's int and float filters try them.
std::optional<int64_t> parse_int(const std::string& text, int base) {
  std::string s = py::strip(text, std::nullopt, true, true);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  if (s.empty()) return std::nullopt;
  size_t used = 0;
  try {
    const int64_t v = std::stoll(s, &used, base);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

std::optional<double> parse_float(const std::string& text) {
  const std::string s = py::strip(text, std::nullopt, true, true);
  if (s.empty()) return std::nullopt;
  size_t used = 0;
  try {
    const double v = std::stod(s, &used);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

bool run_test(const std::string& name, const Value& v, ValueList extra) {
  CallArgs args{std::move(extra), {}};
  return apply_test(name, v, args);
}

// select/reject/selectattr/rejectattr: items passing the test (or truthy with no test name).
Value select_items(const Value& seq, CallArgs& args, bool by_attribute, bool keep) {
  ValueList positional = args.positional;
  std::optional<std::string> attribute;
  if (by_attribute) {
    if (positional.empty()) error("selectattr/rejectattr need an attribute");
    attribute = positional[0].str();
    positional.erase(positional.begin());
  }
  std::optional<std::string> test;
  if (!positional.empty()) {
    test = positional[0].str();
    positional.erase(positional.begin());
  }
  ValueList out;
  if (!seq.truthy()) return Value::Generator({});  // Jinja skips a falsy input (None, empty)
  for (const Value& item : iterate(seq)) {
    const Value subject = attribute ? get_path(item, *attribute) : item;
    const bool pass = test ? run_test(*test, subject, positional) : subject.truthy();
    if (pass == keep) out.push_back(item);
  }
  return Value::Generator(std::move(out));
}

Value indent(const std::string& text, const Value& width, bool first, bool blank) {
  const std::string pad = width.is_string() ? width.as_string() : std::string(static_cast<size_t>(width.as_int()), ' ');
  std::vector<std::string> lines = py::splitlines(text + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i == 0) {
      out = lines[0];
      continue;
    }
    out += "\n";
    if (blank || !lines[i].empty()) out += pad;
    out += lines[i];
  }
  if (first) out = pad + out;
  return Value::String(std::move(out));
}

Value tojson(const Value& v, CallArgs& args) {
  Params p("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  int indent_width = -1;
  if (p.has(1) && !p.get(1).is_none()) {
    if (p.get(1).is_string()) error("tojson: a string indent is not supported");
    indent_width = static_cast<int>(p.get(1).as_int());
  }
  std::string item_sep = indent_width >= 0 ? "," : ", ";
  std::string key_sep = ": ";
  if (p.has(2) && !p.get(2).is_none()) {
    const Value& seps = p.get(2);
    if (!seps.is_sequence() || seps.as_list().size() != 2) error("tojson: separators must be a pair of strings");
    item_sep = seps.as_list()[0].str();
    key_sep = seps.as_list()[1].str();
  }
  std::string out, err;
  if (!v.to_json(out, p.get(0).truthy(), indent_width, item_sep, key_sep, p.get(3).truthy(), err)) error(err);
  return Value::String(std::move(out));
}

Value sorted(const Value& seq, bool reverse, bool case_sensitive, const std::optional<std::string>& attribute) {
  ValueList items = iterate(seq);
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& v : items) keyed.emplace_back(sort_key(item_or_path(v, attribute), case_sensitive), std::move(v));
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    return reverse ? compare_values(b.first, a.first) < 0 : compare_values(a.first, b.first) < 0;
  });
  ValueList out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return Value::List(std::move(out));
}

const std::map<std::string, FilterFn, std::less<>>& filters() {
  static const auto* table = new std::map<std::string, FilterFn, std::less<>>{
      {"abs",
       [](const Value& v, CallArgs& a) {
         Params p("abs", a, {});
         if (v.is_float()) return Value::Float(std::fabs(v.as_double()));
         if (!v.is_number()) error("bad operand type for abs(): '" + v.type_name() + "'");
         return Value::Int(std::llabs(v.as_int()));
       }},
      {"attr",
       [](const Value& v, CallArgs& a) {
         Params p("attr", a, {"name"});
         if (v.is_dict() && !is_method(p.get(0).str())) return Value::Undefined("no attribute " + p.get(0).repr());
         return get_attribute(v, p.get(0).str());
       }},
      {"capitalize",
       [](const Value& v, CallArgs& a) {
         Params p("capitalize", a, {});
         return Value::String(py::capitalize(v.str()));
       }},
      {"count",
       [](const Value& v, CallArgs& a) {
         Params p("count", a, {});
         return Value::Int(length(v));
       }},
      {"default",
       [](const Value& v, CallArgs& a) {
         Params p("default", a, {"default_value", "boolean"});
         const bool use_default = v.is_undefined() || (p.get(1).truthy() && !v.truthy());
         if (!use_default) return v;
         return p.has(0) ? p.get(0) : Value::String("");
       }},
      {"dictsort",
       [](const Value& v, CallArgs& a) {
         Params p("dictsort", a, {"case_sensitive", "by", "reverse"});
         if (!v.is_dict()) error("dictsort expects a dict");
         const bool by_value = p.has(1) && p.get(1).str() == "value";
         ValueList items;
         for (const auto& [k, e] : v.as_dict().items()) items.push_back(Value::Tuple({k, e}));
         const bool cs = p.get(0).truthy();
         std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
           const Value kx = sort_key(x.as_list()[by_value ? 1 : 0], cs);
           const Value ky = sort_key(y.as_list()[by_value ? 1 : 0], cs);
           return p.get(2).truthy() ? compare_values(ky, kx) < 0 : compare_values(kx, ky) < 0;
         });
         return Value::List(std::move(items));
       }},
      {"escape",
       [](const Value& v, CallArgs& a) {
         Params p("escape", a, {});
         return v.is_markup() ? v : Value::Markup(py::html_escape(v.str()));
       }},
      {"first",
       [](const Value& v, CallArgs& a) {
         Params p("first", a, {});
         ValueList items = iterate(v);
         return items.empty() ? Value::Undefined("No first item, sequence was empty.") : items.front();
       }},
      {"float",
       [](const Value& v, CallArgs& a) {
         Params p("float", a, {"default"});
         const Value dflt = p.has(0) ? p.get(0) : Value::Float(0.0);
         if (v.is_number()) return Value::Float(v.as_double());
         if (v.is_string()) {
           if (auto d = parse_float(v.as_string())) return Value::Float(*d);
         }
         return dflt;
       }},
      {"indent",
       [](const Value& v, CallArgs& a) {
         Params p("indent", a, {"width", "first", "blank"});
         return indent(v.str(), p.has(0) ? p.get(0) : Value::Int(4), p.get(1).truthy(), p.get(2).truthy());
       }},
      {"int",
       [](const Value& v, CallArgs& a) {
         Params p("int", a, {"default", "base"});
         const Value dflt = p.has(0) ? p.get(0) : Value::Int(0);
         if (v.is_float()) return Value::Int(static_cast<int64_t>(v.as_double()));
         if (v.is_number()) return Value::Int(v.as_int());
         if (v.is_string()) {
           const int base = p.has(1) ? static_cast<int>(p.get(1).as_int()) : 10;
           if (auto i = parse_int(v.as_string(), base)) return Value::Int(*i);
           if (auto d = parse_float(v.as_string())) return Value::Int(static_cast<int64_t>(*d));
         }
         return dflt;
       }},
      {"items",
       [](const Value& v, CallArgs& a) {
         Params p("items", a, {});
         if (v.is_undefined()) return Value::Generator({});
         if (!v.is_dict()) error("items filter expects a mapping, got " + v.type_name());
         ValueList out;
         for (const auto& [k, e] : v.as_dict().items()) out.push_back(Value::Tuple({k, e}));
         return Value::Generator(std::move(out));
       }},
      {"join",
       [](const Value& v, CallArgs& a) {
         Params p("join", a, {"d", "attribute"});
         const std::string sep = p.has(0) ? p.get(0).str() : "";
         const auto attribute = attribute_param(p, 1);
         std::string out;
         bool first = true;
         for (const Value& item : iterate(v)) {
           if (!first) out += sep;
           first = false;
           out += item_or_path(item, attribute).str();
         }
         return Value::String(std::move(out));
       }},
      {"last",
       [](const Value& v, CallArgs& a) {
         Params p("last", a, {});
         if (v.is_generator()) error("'generator' object is not reversible");
         ValueList items = iterate(v);
         return items.empty() ? Value::Undefined("No last item, sequence was empty.") : items.back();
       }},
      {"length",
       [](const Value& v, CallArgs& a) {
         Params p("length", a, {});
         return Value::Int(length(v));
       }},
      {"list",
       [](const Value& v, CallArgs& a) {
         Params p("list", a, {});
         return Value::List(iterate(v));
       }},
      {"lower",
       [](const Value& v, CallArgs& a) {
         Params p("lower", a, {});
         return same_kind(v, py::lower(v.str()));
       }},
      {"map",
       [](const Value& v, CallArgs& a) {
         ValueList out;
         if (!v.truthy()) return Value::Generator({});  // Jinja skips a falsy input (None, empty)
         std::optional<std::string> attribute;
         Value dflt;
         bool has_default = false;
         for (auto& [k, e] : a.keyword) {
           if (k == "attribute") {
             attribute = e.str();
           } else if (k == "default") {
             dflt = e, has_default = true;
           } else if (a.positional.empty()) {
             error("map() got an unexpected keyword argument '" + k + "'");
           }
         }
         if (attribute) {
           for (const Value& item : iterate(v)) {
             Value x = get_path(item, *attribute);
             out.push_back(x.is_undefined() && has_default ? dflt : x);
           }
           return Value::Generator(std::move(out));
         }
         if (a.positional.empty()) error("map requires a filter name or attribute=");
         const std::string name = a.positional[0].str();
         CallArgs rest{ValueList(a.positional.begin() + 1, a.positional.end()), a.keyword};
         for (const Value& item : iterate(v)) {
           CallArgs copy = rest;
           out.push_back(apply_filter(name, item, copy));
         }
         return Value::Generator(std::move(out));
       }},
      {"max",
       [](const Value& v, CallArgs& a) {
         Params p("max", a, {"case_sensitive", "attribute"});
         Value s = sorted(v, true, p.get(0).truthy(), attribute_param(p, 1));
         return s.as_list().empty() ? Value::Undefined("No aggregated item, sequence was empty.") : s.as_list()[0];
       }},
      {"min",
       [](const Value& v, CallArgs& a) {
         Params p("min", a, {"case_sensitive", "attribute"});
         Value s = sorted(v, false, p.get(0).truthy(), attribute_param(p, 1));
         return s.as_list().empty() ? Value::Undefined("No aggregated item, sequence was empty.") : s.as_list()[0];
       }},
      {"reject", [](const Value& v, CallArgs& a) { return select_items(v, a, false, false); }},
      {"rejectattr", [](const Value& v, CallArgs& a) { return select_items(v, a, true, false); }},
      {"replace",
       [](const Value& v, CallArgs& a) {
         Params p("replace", a, {"old", "new", "count"});
         return Value::String(py::replace(v.str(), p.get(0).str(), p.get(1).str(),
                                          p.has(2) && !p.get(2).is_none() ? p.get(2).as_int() : -1));
       }},
      {"reverse",
       [](const Value& v, CallArgs& a) {
         Params p("reverse", a, {});
         if (v.is_string()) {
           std::u32string u = py::decode_utf8(v.as_string());
           std::reverse(u.begin(), u.end());
           return Value::String(py::encode_utf8(u));
         }
         ValueList items = iterate(v);
         std::reverse(items.begin(), items.end());
         return Value::List(std::move(items));
       }},
      {"round",
       [](const Value& v, CallArgs& a) {
         Params p("round", a, {"precision", "method"});
         const int64_t precision = p.has(0) ? p.get(0).as_int() : 0;
         const std::string method = p.has(1) ? p.get(1).str() : "common";
         const double x = v.as_double();
         if (method == "common") {
           // Python's round(): correctly rounded from the exact binary value, ties to even.
           if (precision >= 0 && precision < 100) {
             char buf[512];
             std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(precision), x);
             return Value::Float(std::strtod(buf, nullptr));
           }
           const double scale = std::pow(10.0, static_cast<double>(-precision));
           return Value::Float(std::nearbyint(x / scale) * scale);
         }
         const double scale = std::pow(10.0, static_cast<double>(precision));
         if (method == "ceil") return Value::Float(std::ceil(x * scale) / scale);
         if (method == "floor") return Value::Float(std::floor(x * scale) / scale);
         error("method must be common, ceil or floor");
       }},
      {"safe",
       [](const Value& v, CallArgs& a) {
         Params p("safe", a, {});
         return v.is_markup() ? v : Value::Markup(v.str());
       }},
      {"select", [](const Value& v, CallArgs& a) { return select_items(v, a, false, true); }},
      {"selectattr", [](const Value& v, CallArgs& a) { return select_items(v, a, true, true); }},
      {"sort",
       [](const Value& v, CallArgs& a) {
         Params p("sort", a, {"reverse", "case_sensitive", "attribute"});
         return sorted(v, p.get(0).truthy(), p.get(1).truthy(), attribute_param(p, 2));
       }},
      {"string",
       [](const Value& v, CallArgs& a) {
         Params p("string", a, {});
         return Value::String(v.str());
       }},
      {"sum",
       [](const Value& v, CallArgs& a) {
         Params p("sum", a, {"attribute", "start"});
         const auto attribute = attribute_param(p, 0);
         Value total = p.has(1) ? p.get(1) : Value::Int(0);
         for (const Value& item : iterate(v)) {
           const Value x = item_or_path(item, attribute);
           if (!x.is_number() || !total.is_number()) error("sum of non-numbers");
           total = (x.is_float() || total.is_float()) ? Value::Float(total.as_double() + x.as_double())
                                                      : Value::Int(total.as_int() + x.as_int());
         }
         return total;
       }},
      {"title",
       [](const Value& v, CallArgs& a) {
         Params p("title", a, {});
         // Words start after '-', whitespace or an opening bracket; each is capitalized.
         std::u32string u = py::decode_utf8(v.str());
         bool word_start = true;
         for (char32_t& c : u) {
           const bool sep = c == '-' || py::is_space(c) || c == '(' || c == '{' || c == '[' || c == '<';
           if (sep) {
             word_start = true;
             continue;
           }
           if (word_start) {
             c = (c >= 'a' && c <= 'z') ? c - 32 : c;
           } else {
             c = (c >= 'A' && c <= 'Z') ? c + 32 : c;
           }
           word_start = false;
         }
         return Value::String(py::encode_utf8(u));
       }},
      {"tojson", tojson},
      {"trim",
       [](const Value& v, CallArgs& a) {
         Params p("trim", a, {"chars"});
         std::optional<std::string> chars;
         if (p.has(0) && !p.get(0).is_none()) chars = p.get(0).str();
         return same_kind(v, py::strip(v.str(), chars, true, true));
       }},
      {"unique",
       [](const Value& v, CallArgs& a) {
         Params p("unique", a, {"case_sensitive", "attribute"});
         const auto attribute = attribute_param(p, 1);
         ValueList out, seen;
         for (const Value& item : iterate(v)) {
           const Value key = sort_key(item_or_path(item, attribute), p.get(0).truthy());
           if (std::any_of(seen.begin(), seen.end(), [&](const Value& s) { return s.equals(key); })) continue;
           seen.push_back(key);
           out.push_back(item);
         }
         return Value::Generator(std::move(out));
       }},
      {"upper",
       [](const Value& v, CallArgs& a) {
         Params p("upper", a, {});
         return same_kind(v, py::upper(v.str()));
       }},
      {"wordcount",
       [](const Value& v, CallArgs& a) {
         Params p("wordcount", a, {});
         return Value::Int(static_cast<int64_t>(py::split(v.str(), std::nullopt, -1, false).size()));
       }},
  };
  return *table;
}

const std::map<std::string, std::string, std::less<>>& filter_aliases() {
  static const auto* aliases = new std::map<std::string, std::string, std::less<>>{{"d", "default"}, {"e", "escape"}};
  return *aliases;
}

bool compare_test(const std::string& op, const Value& v, CallArgs& a) {
  Params p(op, a, {"other"});
  const Value& o = p.get(0);
  if (op == "eq") return v.equals(o);
  if (op == "ne") return !v.equals(o);
  const int c = compare_values(v, o);
  if (op == "lt") return c < 0;
  if (op == "le") return c <= 0;
  if (op == "gt") return c > 0;
  return c >= 0;
}

const std::map<std::string, TestFn, std::less<>>& tests() {
  auto no_args = [](const char* name, std::function<bool(const Value&)> f) {
    return std::pair<const std::string, TestFn>(name, [name, f](const Value& v, CallArgs& a) {
      Params p(name, a, {});
      return f(v);
    });
  };
  auto cmp = [](const char* name, const char* op) {
    return std::pair<const std::string, TestFn>(name, [op](const Value& v, CallArgs& a) {
      return compare_test(op, v, a);
    });
  };
  static const auto* table = new std::map<std::string, TestFn, std::less<>>{
      no_args("defined", [](const Value& v) { return !v.is_undefined(); }),
      no_args("undefined", [](const Value& v) { return v.is_undefined(); }),
      no_args("none", [](const Value& v) { return v.is_none(); }),
      no_args("boolean", [](const Value& v) { return v.is_bool(); }),
      no_args("false", [](const Value& v) { return v.is_bool() && !v.as_bool(); }),
      no_args("true", [](const Value& v) { return v.is_bool() && v.as_bool(); }),
      no_args("integer", [](const Value& v) { return v.is_int(); }),
      no_args("float", [](const Value& v) { return v.is_float(); }),
      no_args("number", [](const Value& v) { return v.is_number(); }),
      no_args("string", [](const Value& v) { return v.is_string(); }),
      no_args("mapping", [](const Value& v) { return v.is_dict(); }),
      no_args("iterable", [](const Value& v) {
        return v.is_string() || v.is_sequence() || v.is_generator() || v.is_dict() || v.is_undefined();
      }),
      no_args("sequence", [](const Value& v) { return v.is_string() || v.is_sequence() || v.is_dict(); }),
      no_args("callable", [](const Value& v) { return v.is_callable(); }),
      no_args("lower", [](const Value& v) { return v.is_string() && py::lower(v.as_string()) == v.as_string(); }),
      no_args("upper", [](const Value& v) { return v.is_string() && py::upper(v.as_string()) == v.as_string(); }),
      no_args("escaped", [](const Value&) { return false; }),
      no_args("odd", [](const Value& v) { return (v.as_int() % 2) != 0; }),
      no_args("even", [](const Value& v) { return (v.as_int() % 2) == 0; }),
      {"divisibleby",
       [](const Value& v, CallArgs& a) {
         Params p("divisibleby", a, {"num"});
         const int64_t d = p.get(0).as_int();
         if (d == 0) error("integer division or modulo by zero");
         return v.as_int() % d == 0;
       }},
      cmp("eq", "eq"), cmp("equalto", "eq"), cmp("==", "eq"),
      cmp("ne", "ne"), cmp("!=", "ne"),
      cmp("lt", "lt"), cmp("lessthan", "lt"), cmp("<", "lt"),
      cmp("le", "le"), cmp("<=", "le"),
      cmp("gt", "gt"), cmp("greaterthan", "gt"), cmp(">", "gt"),
      cmp("ge", "ge"), cmp(">=", "ge"),
      {"in",
       [](const Value& v, CallArgs& a) {
         Params p("in", a, {"seq"});
         const Value& seq = p.get(0);
         if (seq.is_string()) return v.is_string() && seq.as_string().find(v.as_string()) != std::string::npos;
         if (seq.is_dict()) return seq.as_dict().find(v) != nullptr;
         for (const Value& item : iterate(seq)) {
           if (item.equals(v)) return true;
         }
         return false;
       }},
      {"sameas",
       [](const Value& v, CallArgs& a) {
         Params p("sameas", a, {"other"});
         // Identity: singletons and small ints compare by value, shared objects by reference.
         const Value& o = p.get(0);
         if (v.kind() != o.kind()) return false;
         return (v.is_none() || v.is_bool() || v.is_int() || v.is_namespace() || v.is_callable()) && v.equals(o);
       }},
  };
  return *table;
}

}  // namespace

bool is_filter(std::string_view name) { return filters().count(name) || filter_aliases().count(name); }

bool is_test(std::string_view name) { return tests().count(name) != 0; }

Value apply_filter(const std::string& name, const Value& input, CallArgs& args) {
  auto alias = filter_aliases().find(name);
  const std::string& resolved = alias != filter_aliases().end() ? alias->second : name;
  auto it = filters().find(resolved);
  if (it == filters().end()) error("no filter named '" + name + "'");
  return it->second(input, args);
}

bool apply_test(const std::string& name, const Value& input, CallArgs& args) {
  auto it = tests().find(name);
  if (it == tests().end()) error("no test named '" + name + "'");
  return it->second(input, args);
}

}  // namespace deepinfer::chat::jinja
