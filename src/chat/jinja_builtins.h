// What a template can call: filters and tests (jinja_filters.cpp), and attribute access, methods
// of str/dict/list and global functions (jinja_methods.cpp), each with the semantics of Jinja2's
// ImmutableSandboxedEnvironment as transformers configures it (its own `tojson`,
// `raise_exception`, `strftime_now`). Methods that would mutate a list or dict are known but fail
// when called, as the sandbox refuses them. Errors raise RenderError (jinja_error.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_value.h"

namespace deepinfer::chat::jinja {

bool is_filter(std::string_view name);
bool is_test(std::string_view name);
bool is_method(std::string_view name);           // obj.name(...) for some object kind
bool is_global_function(std::string_view name);  // range, namespace, dict, raise_exception, ...

Value apply_filter(const std::string& name, const Value& input, CallArgs& args);
bool apply_test(const std::string& name, const Value& input, CallArgs& args);
Value global_function(const std::string& name);

// obj.name: a method bound to obj, a dict entry, a namespace attribute, or Undefined.
Value get_attribute(const Value& obj, const std::string& name);
// obj[key]: an entry, an element (negative indexes count from the end), or as obj.key.
Value get_item(const Value& obj, const Value& key);
// "a.b.0" looked up item by item, as filters' `attribute=` arguments do.
Value get_path(const Value& obj, const std::string& dotted);

// The elements a for loop visits: list items, dict keys, string characters; none for Undefined.
ValueList iterate(const Value& v);
// Python's ordering (<0, 0, >0) between numbers, strings, or sequences of them.
int compare_values(const Value& a, const Value& b);
// Raises the Undefined's error if v is Undefined (using it as a value, not just testing it).
void require_defined(const Value& v);

// Binds a call's arguments to parameter names as Python does: positional first, then keywords.
class Params {
 public:
  Params(std::string_view function, CallArgs& args, std::vector<std::string_view> names);
  bool has(size_t i) const { return present_[i]; }
  const Value& get(size_t i) const { return values_[i]; }  // Undefined when absent

 private:
  std::vector<Value> values_;
  std::vector<bool> present_;
};

}  // namespace deepinfer::chat::jinja
