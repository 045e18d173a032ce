#include "chat/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "chat/py_string.h"

namespace deepinfer::chat::jinja {

const Value* ValueDict::find(std::string_view key) const {
  for (const auto& [k, v] : items_) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

const Value* ValueDict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.as_string()));
  for (const auto& [k, v] : items_) {
    if (k.equals(key)) return &v;
  }
  return nullptr;
}

void ValueDict::set(std::string key, Value value) { set(Value::String(std::move(key)), std::move(value)); }

void ValueDict::set(Value key, Value value) {
  for (auto& [k, v] : items_) {
    if (k.equals(key)) {
      v = std::move(value);
      return;
    }
  }
  items_.emplace_back(std::move(key), std::move(value));
}

Value Value::Undefined(std::string hint) {
  Value v;
  v.str_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.bool_ = b;
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.int_ = i;
  return v;
}

Value Value::Float(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.float_ = d;
  return v;
}

Value Value::String(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.str_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

Value Value::Markup(std::string s) {
  Value v = String(std::move(s));
  v.markup_ = true;
  return v;
}

Value Value::List(ValueList items) {
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = std::make_shared<const ValueList>(std::move(items));
  return v;
}

Value Value::Tuple(ValueList items) {
  Value v = List(std::move(items));
  v.kind_ = Kind::kTuple;
  return v;
}

Value Value::Generator(ValueList items) {
  Value v = List(std::move(items));
  v.kind_ = Kind::kGenerator;
  return v;
}

Value Value::Dict(ValueDict dict) {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::make_shared<ValueDict>(std::move(dict));
  return v;
}

Value Value::Namespace(ValueDict attrs) {
  Value v = Dict(std::move(attrs));
  v.kind_ = Kind::kNamespace;
  return v;
}

Value Value::Callable(std::string name, Function fn) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.str_ = std::make_shared<const std::string>(std::move(name));
  v.fn_ = std::make_shared<const Function>(std::move(fn));
  return v;
}

Value Value::FromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return None();
    case nlohmann::ordered_json::value_t::boolean:
      return Bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Float(static_cast<double>(u));
      return Int(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Float(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return String(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(FromJson(e));
      return List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      ValueDict d;
      for (const auto& [k, e] : j.items()) d.set(k, FromJson(e));
      return Dict(std::move(d));
    }
    default:
      return None();  // binary and discarded values do not come from parsed JSON text
  }
}

const std::string& Value::undefined_hint() const {
  static const std::string kEmpty;
  return str_ ? *str_ : kEmpty;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return bool_;
    case Kind::kInt:
      return int_ != 0;
    case Kind::kFloat:
      return float_ != 0.0;
    case Kind::kString:
      return !str_->empty();
    case Kind::kList:
    case Kind::kTuple:
      return !list_->empty();
    case Kind::kDict:
      return dict_->size() != 0;
    case Kind::kGenerator:
    case Kind::kNamespace:
    case Kind::kFunction:
      return true;
  }
  return false;
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return *str_;
    default:
      return repr();
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return bool_ ? "True" : "False";
    case Kind::kInt:
      return std::to_string(int_);
    case Kind::kFloat:
      return py::float_repr(float_);
    case Kind::kString:
      return py::repr(*str_);
    case Kind::kList:
    case Kind::kTuple: {
      const bool tuple = kind_ == Kind::kTuple;
      std::string out = tuple ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i) out += ", ";
        out += (*list_)[i].repr();
      }
      if (tuple && list_->size() == 1) out += ",";
      return out + (tuple ? ")" : "]");
    }
    case Kind::kDict:
    case Kind::kNamespace: {
      std::string out = kind_ == Kind::kNamespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, v] : dict_->items()) {
        if (!first) out += ", ";
        first = false;
        out += k.repr() + ": " + v.repr();
      }
      return out + (kind_ == Kind::kNamespace ? "}>" : "}");
    }
    case Kind::kGenerator:
      return "<generator object>";
    case Kind::kFunction:
      return "<function " + *str_ + ">";
  }
  return "";
}

bool Value::equals(const Value& o) const {
  if (is_number() && o.is_number()) {
    if (kind_ == Kind::kFloat || o.kind_ == Kind::kFloat) return as_double() == o.as_double();
    return as_int() == o.as_int();
  }
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kString:
      return *str_ == *o.str_;
    case Kind::kList:
    case Kind::kTuple: {
      if (list_->size() != o.list_->size()) return false;
      for (size_t i = 0; i < list_->size(); ++i) {
        if (!(*list_)[i].equals((*o.list_)[i])) return false;
      }
      return true;
    }
    case Kind::kDict: {
      if (dict_->size() != o.dict_->size()) return false;
      for (const auto& [k, v] : dict_->items()) {
        const Value* other = o.dict_->find(k);
        if (!other || !v.equals(*other)) return false;
      }
      return true;
    }
    case Kind::kGenerator:
      return list_ == o.list_;
    case Kind::kNamespace:
      return dict_ == o.dict_;
    case Kind::kFunction:
      return fn_ == o.fn_;
    default:
      return false;
  }
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kTuple:
      return "tuple";
    case Kind::kGenerator:
      return "generator";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kFunction:
      return "function";
  }
  return "object";
}

namespace {

// The two-character JSON escapes (as Python's json.dumps writes them); false for other characters.
bool short_escape(char32_t c, std::string& out) {
  switch (c) {
    case '"': out += "\\\""; return true;
    case '\\': out += "\\\\"; return true;
    case '\n': out += "\\n"; return true;
    case '\r': out += "\\r"; return true;
    case '\t': out += "\\t"; return true;
    case '\b': out += "\\b"; return true;
    case '\f': out += "\\f"; return true;
    default: return false;
  }
}

void json_escape(std::string& out, const std::string& s, bool ensure_ascii) {
  out.push_back('"');
  char buf[16];
  if (!ensure_ascii) {
    for (char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      if (short_escape(c, out)) continue;
      if (c < 0x20) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        out += buf;
      } else {
        out.push_back(ch);
      }
    }
  } else {
    for (char32_t c : py::decode_utf8(s)) {
      if (short_escape(c, out)) continue;
      if (c >= 0x20 && c < 0x7F) {
        out.push_back(static_cast<char>(c));
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
        out += buf;
      } else {
        const char32_t v = c - 0x10000;
        std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 | (v >> 10)),
                      static_cast<unsigned>(0xDC00 | (v & 0x3FF)));
        out += buf;
      }
    }
  }
  out.push_back('"');
}

void newline_indent(std::string& out, int indent, int level) {
  out.push_back('\n');
  out.append(static_cast<size_t>(indent * level), ' ');
}

bool dump(const Value& v, std::string& out, bool ensure_ascii, int indent, std::string_view item_sep,
          std::string_view key_sep, bool sort_keys, int level, std::string& error) {
  switch (v.kind()) {
    case Value::Kind::kNone:
      out += "null";
      return true;
    case Value::Kind::kBool:
      out += v.as_bool() ? "true" : "false";
      return true;
    case Value::Kind::kInt:
      out += std::to_string(v.as_int());
      return true;
    case Value::Kind::kFloat: {
      const double d = v.as_double();
      if (std::isnan(d)) {
        out += "NaN";
      } else if (std::isinf(d)) {
        out += d < 0 ? "-Infinity" : "Infinity";
      } else {
        out += py::float_repr(d);
      }
      return true;
    }
    case Value::Kind::kString:
      json_escape(out, v.as_string(), ensure_ascii);
      return true;
    case Value::Kind::kList:
    case Value::Kind::kTuple: {
      const ValueList& items = v.as_list();
      if (items.empty()) {
        out += "[]";
        return true;
      }
      out.push_back('[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        if (indent >= 0) newline_indent(out, indent, level + 1);
        if (!dump(items[i], out, ensure_ascii, indent, item_sep, key_sep, sort_keys, level + 1, error)) return false;
      }
      if (indent >= 0) newline_indent(out, indent, level);
      out.push_back(']');
      return true;
    }
    case Value::Kind::kDict: {
      std::vector<const std::pair<Value, Value>*> entries;
      for (const auto& e : v.as_dict().items()) entries.push_back(&e);
      if (entries.empty()) {
        out += "{}";
        return true;
      }
      // json.dumps writes str, int, float, bool and None keys as strings.
      std::vector<std::string> keys;
      for (const auto* e : entries) {
        const Value& k = e->first;
        if (k.is_string()) {
          keys.push_back(k.as_string());
        } else if (k.is_bool()) {
          keys.push_back(k.as_bool() ? "true" : "false");
        } else if (k.is_none()) {
          keys.push_back("null");
        } else if (k.is_number()) {
          keys.push_back(k.repr());
        } else {
          error = "keys must be str, int, float, bool or None, not " + k.type_name();
          return false;
        }
      }
      std::vector<size_t> order(entries.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      if (sort_keys) {
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return keys[a] < keys[b]; });
      }
      out.push_back('{');
      for (size_t n = 0; n < order.size(); ++n) {
        const size_t i = order[n];
        if (n) out += item_sep;
        if (indent >= 0) newline_indent(out, indent, level + 1);
        json_escape(out, keys[i], ensure_ascii);
        out += key_sep;
        if (!dump(entries[i]->second, out, ensure_ascii, indent, item_sep, key_sep, sort_keys, level + 1, error)) {
          return false;
        }
      }
      if (indent >= 0) newline_indent(out, indent, level);
      out.push_back('}');
      return true;
    }
    default:
      error = "Object of type " + v.type_name() + " is not JSON serializable";
      return false;
  }
}

}  // namespace

bool Value::to_json(std::string& out, bool ensure_ascii, int indent, std::string_view item_sep,
                    std::string_view key_sep, bool sort_keys, std::string& error) const {
  return dump(*this, out, ensure_ascii, indent, item_sep, key_sep, sort_keys, 0, error);
}

}  // namespace deepinfer::chat::jinja
