// jinja::Value: the data a chat template computes with, modelled on the Python objects that
// Jinja2 handles in transformers (None, bool, int, float, str, list, tuple, dict, namespace,
// callables, and Jinja's Undefined). Strings, lists and dicts are immutable and shared, so
// copying a Value is cheap; only a Namespace is mutable (its attributes, through `set ns.x`).
// Dict keys keep insertion order, as Python dicts do; they are strings (JSON, namespaces) or, from
// template literals, any hashable value, compared with Python's == (1, 1.0 and True are one key).
// Values are not thread-safe to share while a Namespace in them is being assigned; a render
// builds its own.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace deepinfer::chat::jinja {

class Value;
class ValueDict;
struct CallArgs;
using ValueList = std::vector<Value>;

// A callable: a macro, a global function, or a method bound to its object. Errors raise
// RenderError (jinja_error.h).
using Function = std::function<Value(CallArgs&)>;

class Value {
 public:
  // kGenerator: what Jinja's map/select/items filters return, a one-way sequence: iterable, always
  // true, but without len(), indexing or JSON form.
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kTuple, kGenerator, kDict, kNamespace,
                    kFunction };

  Value() = default;  // Undefined without a name
  static Value Undefined(std::string hint);  // hint: the message an access to it raises
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value String(std::string s);
  // A string marked safe (markupsafe's Markup, from the `safe` and `escape` filters): text added to
  // it with `+`, or passed to its replace/join/format, is HTML-escaped first.
  static Value Markup(std::string s);
  static Value List(ValueList items);
  static Value Tuple(ValueList items);
  static Value Generator(ValueList items);
  static Value Dict(ValueDict dict);
  static Value Namespace(ValueDict attrs);
  static Value Callable(std::string name, Function fn);

  // JSON as Python's json.loads gives it (objects keep their key order).
  static Value FromJson(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_markup() const { return kind_ == Kind::kString && markup_; }
  bool is_sequence() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }
  bool is_generator() const { return kind_ == Kind::kGenerator; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kFunction; }

  bool as_bool() const { return bool_; }
  int64_t as_int() const { return kind_ == Kind::kBool ? (bool_ ? 1 : 0) : int_; }  // bool and int
  double as_double() const { return kind_ == Kind::kFloat ? float_ : static_cast<double>(as_int()); }
  const std::string& as_string() const { return *str_; }
  const ValueList& as_list() const { return *list_; }  // list, tuple or generator
  const ValueDict& as_dict() const { return *dict_; }  // dict or namespace attributes
  ValueDict& namespace_attrs() const { return *dict_; }
  const std::string& undefined_hint() const;  // empty for an unnamed Undefined
  const std::string& function_name() const { return *str_; }
  Value call(CallArgs& args) const { return (*fn_)(args); }

  // Python truthiness; Undefined is false.
  bool truthy() const;
  // str(): what {{ value }} prints. Undefined prints "".
  std::string str() const;
  // repr(): how a value prints inside a list or dict.
  std::string repr() const;
  // Python's == (1 == 1.0 == True; dicts compare without order).
  bool equals(const Value& other) const;
  // Python's type name, for messages ("str", "dict", "NoneType").
  std::string type_name() const;

  // json.dumps(value, ensure_ascii, indent, separators, sort_keys). indent < 0: none.
  // Fails (returns false, with a message) on values JSON cannot hold (Undefined, callables).
  bool to_json(std::string& out, bool ensure_ascii, int indent, std::string_view item_sep, std::string_view key_sep,
               bool sort_keys, std::string& error) const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool bool_ = false;
  bool markup_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<const std::string> str_;  // string, undefined hint, function name
  std::shared_ptr<const ValueList> list_;
  std::shared_ptr<ValueDict> dict_;
  std::shared_ptr<const Function> fn_;
};

// Insertion-ordered map (a Python dict as templates build and read it).
class ValueDict {
 public:
  const Value* find(std::string_view key) const;
  const Value* find(const Value& key) const;
  void set(std::string key, Value value);  // replaces in place or appends
  void set(Value key, Value value);
  const std::vector<std::pair<Value, Value>>& items() const { return items_; }
  size_t size() const { return items_.size(); }

 private:
  std::vector<std::pair<Value, Value>> items_;
};

// Arguments of a call: positional, then keyword in call order.
struct CallArgs {
  ValueList positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

}  // namespace deepinfer::chat::jinja
