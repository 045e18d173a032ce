// Attribute and item access, methods of str/dict/list, global functions, and the helpers that
// filters share (jinja_builtins.h).
#include <algorithm>
#include <ctime>
#include <set>

#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"
#include "chat/py_string.h"

namespace deepinfer::chat::jinja {
namespace {

const std::set<std::string, std::less<>> kStringMethods = {
    "strip",  "lstrip",     "rstrip",  "split",   "rsplit",  "splitlines", "startswith",   "endswith",
    "replace", "upper",     "lower",   "title",   "capitalize", "find",    "rfind",        "count",
    "join",    "isdigit",   "isalpha", "isalnum", "isspace", "islower",    "isupper",      "removeprefix",
    "removesuffix", "format"};
const std::set<std::string, std::less<>> kDictMethods = {"get", "items", "keys", "values"};
const std::set<std::string, std::less<>> kListMethods = {"count", "index"};
// Known, but refused by the immutable sandbox when called.
const std::set<std::string, std::less<>> kMutatingDictMethods = {"pop", "popitem", "setdefault", "update", "clear"};
const std::set<std::string, std::less<>> kMutatingListMethods = {"append", "extend", "insert", "pop",
                                                                 "remove", "reverse", "sort",   "clear"};
const std::set<std::string, std::less<>> kGlobals = {"range", "namespace", "dict", "raise_exception",
                                                     "strftime_now"};

[[noreturn]] void error(const std::string& message) { throw RenderError(message); }

const std::string& string_arg(const Value& v, std::string_view what) {
  if (!v.is_string()) error(std::string(what) + " must be str, not " + v.type_name());
  return v.as_string();
}

std::optional<std::string> optional_string(const Params& p, size_t i, std::string_view what) {
  if (!p.has(i) || p.get(i).is_none()) return std::nullopt;
  return string_arg(p.get(i), what);
}

int64_t int_arg(const Value& v, std::string_view what) {
  if (!v.is_int() && !v.is_bool()) error(std::string(what) + " must be an integer, not " + v.type_name());
  return v.as_int();
}

bool all_chars(const std::string& s, bool (*pred)(char32_t)) {
  if (s.empty()) return false;
  for (char32_t c : py::decode_utf8(s)) {
    if (!pred(c)) return false;
  }
  return true;
}

// str.format with plain fields: {}, {0}, {name}, an optional !r/!s conversion, {{ and }}.
std::string format_string(const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t next_auto = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      error("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) error("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    char conversion = 0;
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      conversion = bang + 1 < field.size() ? field[bang + 1] : 0;
      field.resize(bang);
    }
    if (field.find_first_of(":.[") != std::string::npos) error("format(): only plain {} fields are supported");
    const Value* value = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), ::isdigit)) {
      const size_t index = field.empty() ? next_auto++ : std::stoul(field);
      if (index >= args.positional.size()) error("Replacement index " + std::to_string(index) + " out of range");
      value = &args.positional[index];
    } else {
      for (const auto& [k, v] : args.keyword) {
        if (k == field) value = &v;
      }
      if (!value) error("format(): no argument named '" + field + "'");
    }
    out += conversion == 'r' ? value->repr() : value->str();
  }
  return out;
}

Value string_method(const std::string& self, const std::string& name, CallArgs& args) {
  if (name == "format") return Value::String(format_string(self, args));
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    Params p(name, args, {"chars"});
    return Value::String(py::strip(self, optional_string(p, 0, "chars"), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    Params p(name, args, {"sep", "maxsplit"});
    auto sep = optional_string(p, 0, "sep");
    if (sep && sep->empty()) error("empty separator");
    ValueList parts;
    for (auto& s : py::split(self, sep, p.has(1) ? int_arg(p.get(1), "maxsplit") : -1, name == "rsplit")) {
      parts.push_back(Value::String(std::move(s)));
    }
    return Value::List(std::move(parts));
  }
  if (name == "splitlines") {
    Params p(name, args, {"keepends"});
    ValueList lines;
    for (auto& s : py::splitlines(self, p.get(0).truthy())) lines.push_back(Value::String(std::move(s)));
    return Value::List(std::move(lines));
  }
  if (name == "startswith" || name == "endswith") {
    Params p(name, args, {"prefix"});
    const Value& arg = p.get(0);
    std::vector<std::string> options;
    if (arg.kind() == Value::Kind::kTuple) {
      for (const Value& v : arg.as_list()) options.push_back(string_arg(v, name + " argument"));
    } else {
      options.push_back(string_arg(arg, name + " argument"));
    }
    for (const std::string& o : options) {
      if (name == "startswith" ? self.compare(0, o.size(), o) == 0 && self.size() >= o.size()
                               : self.size() >= o.size() && self.compare(self.size() - o.size(), o.size(), o) == 0) {
        return Value::Bool(true);
      }
    }
    return Value::Bool(false);
  }
  if (name == "replace") {
    Params p(name, args, {"old", "new", "count"});
    return Value::String(py::replace(self, string_arg(p.get(0), "old"), string_arg(p.get(1), "new"),
                                     p.has(2) ? int_arg(p.get(2), "count") : -1));
  }
  if (name == "upper") return Value::String(py::upper(self));
  if (name == "lower") return Value::String(py::lower(self));
  if (name == "title") return Value::String(py::str_title(self));
  if (name == "capitalize") return Value::String(py::capitalize(self));
  if (name == "find" || name == "rfind") {
    Params p(name, args, {"sub"});
    return Value::Int(py::find(self, string_arg(p.get(0), "sub"), name == "rfind"));
  }
  if (name == "count") {
    Params p(name, args, {"sub"});
    return Value::Int(py::count(self, string_arg(p.get(0), "sub")));
  }
  if (name == "join") {
    Params p(name, args, {"iterable"});
    std::string out;
    bool first = true;
    for (const Value& v : iterate(p.get(0))) {
      if (!first) out += self;
      first = false;
      out += string_arg(v, "join item");
    }
    return Value::String(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    Params p(name, args, {"affix"});
    const std::string& a = string_arg(p.get(0), "affix");
    if (name == "removeprefix" && self.compare(0, a.size(), a) == 0) return Value::String(self.substr(a.size()));
    if (name == "removesuffix" && self.size() >= a.size() && self.compare(self.size() - a.size(), a.size(), a) == 0) {
      return Value::String(self.substr(0, self.size() - a.size()));
    }
    return Value::String(self);
  }
  if (name == "isdigit") return Value::Bool(all_chars(self, [](char32_t c) { return c >= '0' && c <= '9'; }));
  if (name == "isalpha") {
    return Value::Bool(all_chars(self, [](char32_t c) { return (c | 32) >= 'a' && (c | 32) <= 'z'; }));
  }
  if (name == "isalnum") {
    return Value::Bool(
        all_chars(self, [](char32_t c) { return ((c | 32) >= 'a' && (c | 32) <= 'z') || (c >= '0' && c <= '9'); }));
  }
  if (name == "isspace") return Value::Bool(all_chars(self, py::is_space));
  if (name == "islower" || name == "isupper") {
    bool cased = false;
    for (char c : self) {
      if (c >= 'a' && c <= 'z') {
        if (name == "isupper") return Value::Bool(false);
        cased = true;
      } else if (c >= 'A' && c <= 'Z') {
        if (name == "islower") return Value::Bool(false);
        cased = true;
      }
    }
    return Value::Bool(cased);
  }
  error("'str' object has no attribute '" + name + "'");
}

Value dict_method(const Value& self, const std::string& name, CallArgs& args) {
  const ValueDict& d = self.as_dict();
  if (name == "get") {
    Params p(name, args, {"key", "default"});
    if (const Value* v = d.find(p.get(0))) return *v;
    return p.has(1) ? p.get(1) : Value::None();
  }
  Params p(name, args, {});
  ValueList out;
  for (const auto& [k, v] : d.items()) {
    if (name == "items") {
      out.push_back(Value::Tuple({k, v}));
    } else if (name == "keys") {
      out.push_back(k);
    } else {
      out.push_back(v);
    }
  }
  return Value::List(std::move(out));
}

Value list_method(const Value& self, const std::string& name, CallArgs& args) {
  Params p(name, args, {"value"});
  const ValueList& items = self.as_list();
  int64_t n = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].equals(p.get(0))) {
      if (name == "index") return Value::Int(static_cast<int64_t>(i));
      ++n;
    }
  }
  if (name == "index") error(p.get(0).repr() + " is not in list");
  return Value::Int(n);
}

// markupsafe's Markup methods: arguments are escaped first, string results stay marked safe.
Value markup_method(const Value& self, const std::string& name, CallArgs& args) {
  auto escaped = [](const Value& v) { return v.is_markup() ? v : Value::Markup(py::html_escape(v.str())); };
  if (name == "replace" || name == "format") {
    for (Value& v : args.positional) v = escaped(v);
    for (auto& [k, v] : args.keyword) v = escaped(v);
  } else if (name == "join" && !args.positional.empty()) {
    ValueList items;
    for (const Value& v : iterate(args.positional[0])) items.push_back(escaped(v));
    args.positional[0] = Value::List(std::move(items));
  }
  Value result = string_method(self.as_string(), name, args);
  if (result.is_string()) return Value::Markup(result.as_string());
  if (result.is_sequence() && (name == "split" || name == "rsplit" || name == "splitlines")) {
    ValueList parts;
    for (const Value& v : result.as_list()) parts.push_back(Value::Markup(v.as_string()));
    return Value::List(std::move(parts));
  }
  return result;
}

Value bind(const Value& self, const std::string& name) {
  return Value::Callable(name, [self, name](CallArgs& args) -> Value {
    if (self.is_markup()) return markup_method(self, name, args);
    if (self.is_string()) return string_method(self.as_string(), name, args);
    if (self.is_dict()) {
      if (kMutatingDictMethods.count(name)) error("access to attribute '" + name + "' of 'dict' object is unsafe.");
      return dict_method(self, name, args);
    }
    if (kMutatingListMethods.count(name)) {
      error("access to attribute '" + name + "' of '" + self.type_name() + "' object is unsafe.");
    }
    return list_method(self, name, args);
  });
}

Value no_attribute(const Value& obj, const std::string& name) {
  const std::string owner = obj.is_none() ? "'None'" : "'" + obj.type_name() + " object'";
  return Value::Undefined(owner + " has no attribute '" + name + "'");
}

std::string strftime_now(const std::string& format) {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::string buf(256 + format.size() * 4, '\0');
  const size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &local);
  buf.resize(n);
  return buf;
}

}  // namespace

Params::Params(std::string_view function, CallArgs& args, std::vector<std::string_view> names)
    : values_(names.size()), present_(names.size(), false) {
  if (args.positional.size() > names.size()) {
    error(std::string(function) + "() takes at most " + std::to_string(names.size()) + " arguments (" +
          std::to_string(args.positional.size()) + " given)");
  }
  for (size_t i = 0; i < args.positional.size(); ++i) {
    values_[i] = args.positional[i];
    present_[i] = true;
  }
  for (auto& [key, value] : args.keyword) {
    auto it = std::find(names.begin(), names.end(), key);
    if (it == names.end()) error(std::string(function) + "() got an unexpected keyword argument '" + key + "'");
    const size_t i = static_cast<size_t>(it - names.begin());
    if (present_[i]) error(std::string(function) + "() got multiple values for argument '" + key + "'");
    values_[i] = value;
    present_[i] = true;
  }
}

bool is_method(std::string_view name) {
  return kStringMethods.count(name) || kDictMethods.count(name) || kListMethods.count(name) ||
         kMutatingDictMethods.count(name) || kMutatingListMethods.count(name) || name == "cycle";
}

bool is_global_function(std::string_view name) { return kGlobals.count(name) != 0; }

void require_defined(const Value& v) {
  if (!v.is_undefined()) return;
  error(v.undefined_hint().empty() ? std::string("value is undefined") : v.undefined_hint());
}

Value get_attribute(const Value& obj, const std::string& name) {
  require_defined(obj);
  switch (obj.kind()) {
    case Value::Kind::kDict:
      if (kDictMethods.count(name) || kMutatingDictMethods.count(name)) return bind(obj, name);
      if (const Value* v = obj.as_dict().find(name)) return *v;
      return no_attribute(obj, name);
    case Value::Kind::kNamespace:
      if (const Value* v = obj.as_dict().find(name)) return *v;
      return no_attribute(obj, name);
    case Value::Kind::kString:
      if (kStringMethods.count(name)) return bind(obj, name);
      return no_attribute(obj, name);
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      if (kListMethods.count(name) || (obj.kind() == Value::Kind::kList && kMutatingListMethods.count(name))) {
        return bind(obj, name);
      }
      return no_attribute(obj, name);
    default:
      return no_attribute(obj, name);
  }
}

Value get_item(const Value& obj, const Value& key) {
  require_defined(obj);
  // As Jinja's getitem: a key of the wrong type finds nothing (Undefined), it does not raise.
  if (key.is_undefined()) return Value::Undefined("'" + obj.type_name() + " object' has no element Undefined");
  switch (obj.kind()) {
    case Value::Kind::kDict:
    case Value::Kind::kNamespace:
      if (obj.is_dict()) {
        if (const Value* v = obj.as_dict().find(key)) return *v;
      }
      if (key.is_string()) return get_attribute(obj, key.as_string());
      return Value::Undefined("'" + obj.type_name() + " object' has no attribute " + key.repr());
    case Value::Kind::kList:
    case Value::Kind::kTuple:
    case Value::Kind::kString: {
      if (key.is_string()) return get_attribute(obj, key.as_string());
      if (!key.is_int() && !key.is_bool()) {
        return Value::Undefined("'" + obj.type_name() + " object' has no element " + key.repr());
      }
      int64_t i = key.as_int();
      if (obj.is_string()) {
        const std::u32string u = py::decode_utf8(obj.as_string());
        const int64_t n = static_cast<int64_t>(u.size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value::Undefined("string index out of range");
        return Value::String(py::encode_utf8(std::u32string(1, u[static_cast<size_t>(i)])));
      }
      const ValueList& items = obj.as_list();
      const int64_t n = static_cast<int64_t>(items.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::Undefined(obj.type_name() + " object has no element " + key.repr());
      return items[static_cast<size_t>(i)];
    }
    default:
      if (key.is_string()) return get_attribute(obj, key.as_string());
      return Value::Undefined("'" + obj.type_name() + "' object has no element " + key.repr());
  }
}

Value get_path(const Value& obj, const std::string& dotted) {
  Value cur = obj;
  size_t start = 0;
  while (true) {
    const size_t dot = dotted.find('.', start);
    const std::string part = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    cur = get_item(cur, numeric ? Value::Int(std::stoll(part)) : Value::String(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

ValueList iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
    case Value::Kind::kTuple:
    case Value::Kind::kGenerator:
      return v.as_list();
    case Value::Kind::kDict: {
      ValueList keys;
      for (const auto& [k, e] : v.as_dict().items()) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      ValueList chars;
      for (char32_t c : py::decode_utf8(v.as_string())) chars.push_back(Value::String(py::encode_utf8({&c, 1})));
      return chars;
    }
    default:
      error("'" + v.type_name() + "' object is not iterable");
  }
}

int compare_values(const Value& a, const Value& b) {
  require_defined(a);
  require_defined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.kind() == b.kind() && a.is_sequence()) {
    const ValueList& x = a.as_list();
    const ValueList& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (x[i].equals(y[i])) continue;
      return compare_values(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  error("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

Value global_function(const std::string& name) {
  if (name == "range") {
    return Value::Callable(name, [](CallArgs& args) -> Value {
      Params p("range", args, {"a", "b", "step"});
      int64_t start = 0, stop = 0, step = 1;
      if (p.has(1)) {
        start = int_arg(p.get(0), "range() argument");
        stop = int_arg(p.get(1), "range() argument");
      } else {
        stop = int_arg(p.get(0), "range() argument");
      }
      if (p.has(2)) step = int_arg(p.get(2), "range() argument");
      if (step == 0) error("range() arg 3 must not be zero");
      ValueList out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (out.size() >= 100000) error("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
        out.push_back(Value::Int(i));
      }
      return Value::List(std::move(out));
    });
  }
  if (name == "namespace" || name == "dict") {
    const bool ns = name == "namespace";
    return Value::Callable(name, [ns](CallArgs& args) -> Value {
      ValueDict attrs;
      if (args.positional.size() > 1) error("namespace() takes at most one positional argument");
      if (!args.positional.empty()) {
        const Value& init = args.positional[0];
        if (!init.is_dict()) error("cannot convert " + init.type_name() + " to a dict");
        for (const auto& [k, v] : init.as_dict().items()) attrs.set(k, v);
      }
      for (auto& [k, v] : args.keyword) attrs.set(k, v);
      return ns ? Value::Namespace(std::move(attrs)) : Value::Dict(std::move(attrs));
    });
  }
  if (name == "raise_exception") {
    return Value::Callable(name, [](CallArgs& args) -> Value {
      Params p("raise_exception", args, {"message"});
      error(p.get(0).str());
    });
  }
  if (name == "strftime_now") {
    return Value::Callable(name, [](CallArgs& args) -> Value {
      Params p("strftime_now", args, {"format"});
      return Value::String(strftime_now(string_arg(p.get(0), "format")));
    });
  }
  return Value::Undefined("'" + name + "' is undefined");
}

}  // namespace deepinfer::chat::jinja
