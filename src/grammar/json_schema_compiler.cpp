#include "grammar/json_schema_compiler.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "grammar/expr.h"
#include "grammar/grammar_builder.h"
#include "grammar/integer_range.h"
#include "grammar/regex_parser.h"
#include "grammar/string_formats.h"

namespace deepinfer::grammar {
namespace {

using json = nlohmann::ordered_json;

const std::set<std::string> kObjectKeywords = {"properties", "required", "additionalProperties", "patternProperties",
                                               "unevaluatedProperties", "minProperties",
                                               "maxProperties"};
const std::set<std::string> kArrayKeywords = {"items", "prefixItems", "additionalItems",
                                              "unevaluatedItems", "minItems", "maxItems",
                                              "uniqueItems"};
const std::set<std::string> kStringKeywords = {"minLength", "maxLength", "pattern", "format"};
const std::set<std::string> kNumberKeywords = {"minimum", "maximum", "exclusiveMinimum",
                                               "exclusiveMaximum", "multipleOf"};
const std::set<std::string> kOtherKeywords = {"type", "enum", "const", "anyOf", "oneOf", "allOf",
                                              "$ref"};
// Keywords of the JSON Schema vocabularies (drafts 3 to 2020-12) that constrain values and are
// not supported: a schema using one fails to compile. Keywords of no vocabulary are annotations
// to every validator, and so to the compiler too.
const std::set<std::string> kUnsupported = {
    "not", "if", "then", "else", "contains", "minContains", "maxContains",
    "propertyNames", "dependentRequired", "dependentSchemas", "dependencies", "$dynamicRef",
    "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor", "extends", "disallow", "divisibleBy"};

enum TypeBits : unsigned {
  kNull = 1, kBoolean = 2, kObject = 4, kArray = 8, kString = 16, kInteger = 32, kNumber = 64,
  kAnyType = 127,
  kEscape = 128,  // value_rule only: a string escape sequence
};

bool is_integral(const json& v) {
  return v.is_number_integer() ||
         (v.is_number_float() && std::isfinite(v.get<double>()) && v.get<double>() == std::floor(v.get<double>()));
}

unsigned value_type(const json& v) {
  if (v.is_null()) return kNull;
  if (v.is_boolean()) return kBoolean;
  if (v.is_object()) return kObject;
  if (v.is_array()) return kArray;
  if (v.is_string()) return kString;
  return is_integral(v) ? kInteger : kNumber;
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// The JSON text of a code point inside a string literal: itself, or its escape.
std::string json_escape(char32_t c) {
  switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '\b': return "\\b";
    case '\f': return "\\f";
    default: {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
      return buf;
    }
  }
}

// The intersection of two normalized sets.
CodePointRanges intersect(const CodePointRanges& a, const CodePointRanges& b) {
  CodePointRanges out;
  for (auto [lo1, hi1] : a) {
    for (auto [lo2, hi2] : b) {
      if (std::max(lo1, lo2) <= std::min(hi1, hi2)) out.push_back({std::max(lo1, lo2), std::min(hi1, hi2)});
    }
  }
  return normalize_ranges(std::move(out));
}

// `e` (over code points) as the JSON string-literal text of the same strings, the code points of
// `escaped` (normalized) written as escapes.
Expr escape_for_json(const Expr& e, const CodePointRanges& escaped) {
  if (e.kind == Expr::Kind::kCodePoints) {
    const CodePointRanges ranges = normalize_ranges(e.ranges);
    const CodePointRanges keep = intersect(ranges, complement_ranges(escaped));
    std::vector<Expr> options;
    if (!keep.empty()) options.push_back(Expr::CodePoints(keep));
    for (auto [lo, hi] : intersect(ranges, escaped)) {
      for (char32_t c = lo; c <= hi; ++c) options.push_back(Expr::Literal(json_escape(c)));
    }
    if (options.empty()) return Expr::CodePoints({});
    return Expr::Alt(std::move(options));
  }
  Expr out = e;
  for (Expr& c : out.children) c = escape_for_json(c, escaped);
  return out;
}

class Compiler {
 public:
  Compiler(const json& root, const JsonSchemaOptions& options)
      : root_(root),
        options_(options),
        b_(options.limits),
        escaped_(escaped_set(options)),
        plain_(complement_ranges(escaped_)),
        raw_chars_(complement_ranges(normalize_ranges(options.escaped_code_points))) {}

  Status check_options() const {
    if (options_.max_integer_digits < 19 || options_.max_fraction_digits < 1 || options_.max_exponent_digits < 1) {
      return Status::Error("JSON Schema options: at least 19 integer digits (int64) and 1 fraction and exponent digit");
    }
    for (auto [lo, hi] : options_.escaped_code_points) {
      if (hi > 0xFFFF) return Status::Error("JSON Schema options: escaped code points must lie in the BMP");
    }
    return Status::Ok();
  }

  Result<Grammar> run() {
    DI_RETURN_IF_ERROR(check_options());
    DI_RETURN_IF_ERROR(check_json_depth(root_));
    const uint32_t root = b_.declare("root");
    DI_ASSIGN_OR_RETURN(Expr body, compile(root_, "#", 0));
    DI_RETURN_IF_ERROR(b_.define(root, body));
    return b_.build(root);
  }

  // The members of the object schema at the root, for compile_object_members.
  Result<std::vector<ObjectMember>> members() {
    DI_RETURN_IF_ERROR(check_options());
    DI_RETURN_IF_ERROR(check_json_depth(root_));
    if (!root_.is_object()) return Status::Error("schema at # is not an object");
    DI_RETURN_IF_ERROR(check_keywords(root_, "#"));
    flat_root_ = root_;
    if (root_.contains("$ref") || root_.contains("allOf")) {
      DI_ASSIGN_OR_RETURN(flat_root_, flatten(root_, "#", 0));
    }
    for (const char* k : {"anyOf", "oneOf", "enum", "const", "patternProperties"}) {
      if (flat_root_.contains(k)) return Status::Error(quoted(k) + " at # is not supported where members are listed one by one");
    }
    DI_ASSIGN_OR_RETURN(unsigned types, admitted_types(flat_root_, "#"));
    if (!(types & kObject)) return Status::Error("schema at # admits no object");
    DI_ASSIGN_OR_RETURN(ObjectLayout layout, object_layout(flat_root_, "#"));
    if (layout.extra) {
      return Status::Error("'additionalProperties' at #: only declared properties can be listed one by one (set it to false)");
    }
    std::vector<ObjectMember> out;
    for (const Property& p : layout.props) {
      const std::string ppath = "#/properties/" + p.name;
      ObjectMember m;
      m.name = p.name;
      m.required = p.required;
      DI_ASSIGN_OR_RETURN(unsigned member_types, top_types(*p.schema, ppath));
      Compiler raw(root_, options_);
      DI_ASSIGN_OR_RETURN(m.raw_string, raw.raw_root(*p.schema, ppath));
      if (member_types != kString || !m.raw_string) {
        Compiler value(root_, options_);
        DI_ASSIGN_OR_RETURN(Grammar g, value.root_of(*p.schema, ppath));
        m.json_value = std::move(g);
      }
      out.push_back(std::move(m));
    }
    return out;
  }

  Result<Grammar> any_object() {
    const uint32_t root = b_.declare("root");
    DI_RETURN_IF_ERROR(b_.define(root, Expr::Ref(value_rule(kObject))));
    return b_.build(root);
  }

 private:
  // Nesting of the schema JSON itself, checked without recursion before anything recurses on it.
  Status check_json_depth(const json& j) {
    const size_t limit = 8 * options_.max_schema_depth;
    std::vector<std::pair<const json*, size_t>> work{{&j, 1}};
    while (!work.empty()) {
      auto [v, d] = work.back();
      work.pop_back();
      if (d > limit) return Status::Error("schema JSON nested deeper than " + std::to_string(limit));
      if (v->is_structured()) {
        for (const json& c : *v) work.push_back({&c, d + 1});
      }
    }
    return Status::Ok();
  }

  static CodePointRanges escaped_set(const JsonSchemaOptions& options) {
    CodePointRanges r = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
    if (options.escape_less_than) r.push_back({'<', '<'});
    r.insert(r.end(), options.escaped_code_points.begin(), options.escaped_code_points.end());
    return normalize_ranges(std::move(r));
  }

  static bool in_ranges(const CodePointRanges& ranges, char32_t c) {
    for (auto [lo, hi] : ranges) {
      if (c >= lo && c <= hi) return true;
    }
    return false;
  }

  // The compact JSON text of `v`, its strings written with escaped_ escaped ('<' and non-ASCII
  // outside strings never occur, so they can be replaced throughout).
  std::string json_text(const json& v) const {
    const std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
    if (!options_.escape_less_than && options_.escaped_code_points.empty()) return text;
    std::string out;
    for (size_t i = 0; i < text.size();) {
      const uint8_t lead = uint8_t(text[i]);
      const size_t n = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
      char32_t c = n == 1 ? lead : lead & (0x7F >> n);
      for (size_t k = 1; k < n && i + k < text.size(); ++k) c = (c << 6) | (uint8_t(text[i + k]) & 0x3F);
      if (c == '<' ? options_.escape_less_than : in_ranges(options_.escaped_code_points, c)) {
        out += json_escape(c);
      } else {
        out.append(text, i, n);
      }
      i += n;
    }
    return out;
  }

  Expr sep() {
    return options_.separator_space ? Expr::Seq({Expr::Char(','), Expr::Optional(Expr::Char(' '))})
                                    : Expr::Char(',');
  }
  Expr colon() {
    return options_.separator_space ? Expr::Seq({Expr::Char(':'), Expr::Optional(Expr::Char(' '))})
                                    : Expr::Char(':');
  }
  Expr digits(char lo, char hi) { return Expr::CodePoints({{char32_t(lo), char32_t(hi)}}); }

  // Shared rules of generic JSON, defined on first use: one of kObject, kArray, kString,
  // kNumber (any number), kAnyType (any value), kNull for one string character and kEscape for
  // one escape sequence.
  uint32_t value_rule(unsigned which) {
    auto it = shared_.find(which);
    if (it != shared_.end()) return it->second;
    static const std::map<unsigned, std::string> kNames = {
        {kObject, "json-object"}, {kArray, "json-array"}, {kString, "json-string"},
        {kNumber, "json-number"}, {kAnyType, "json-value"}, {kNull, "json-char"},
        {kEscape, "json-escape"}};
    const uint32_t id = b_.declare(kNames.at(which));
    shared_.emplace(which, id);
    Expr body;
    if (which == kAnyType) {
      body = Expr::Alt({Expr::Ref(value_rule(kObject)), Expr::Ref(value_rule(kArray)),
                        Expr::Ref(value_rule(kString)), Expr::Ref(value_rule(kNumber)),
                        Expr::Literal("true"), Expr::Literal("false"), Expr::Literal("null")});
    } else if (which == kObject) {
      Expr member = Expr::Seq({Expr::Ref(value_rule(kString)), colon(), Expr::Ref(value_rule(kAnyType))});
      body = Expr::Seq({Expr::Char('{'),
                        Expr::Optional(Expr::Seq({member, Expr::Repeat(Expr::Seq({sep(), member}), 0, kUnbounded)})),
                        Expr::Char('}')});
    } else if (which == kArray) {
      Expr item = Expr::Ref(value_rule(kAnyType));
      body = Expr::Seq({Expr::Char('['),
                        Expr::Optional(Expr::Seq({item, Expr::Repeat(Expr::Seq({sep(), item}), 0, kUnbounded)})),
                        Expr::Char(']')});
    } else if (which == kString) {
      body = Expr::Seq({Expr::Char('"'), Expr::Repeat(Expr::Ref(value_rule(kNull)), 0, kUnbounded),
                        Expr::Char('"')});
    } else if (which == kNull) {
      body = Expr::Alt({Expr::CodePoints(plain_),
                        Expr::Ref(value_rule(kEscape))});
    } else if (which == kEscape) {
      Expr hex = Expr::CodePoints({{'0', '9'}, {'A', 'F'}, {'a', 'f'}});
      // \uXXXX outside the surrogates, so every escape is one character.
      Expr u = Expr::Seq({Expr::Char('u'),
                          Expr::Alt({Expr::Seq({Expr::CodePoints({{'0', '9'}, {'A', 'C'}, {'a', 'c'}}), hex, hex, hex}),
                                     Expr::Seq({Expr::CodePoints({{'D', 'D'}, {'d', 'd'}}), digits('0', '7'), hex, hex}),
                                     Expr::Seq({Expr::CodePoints({{'E', 'F'}, {'e', 'f'}}), hex, hex, hex})})});
      body = Expr::Seq({Expr::Char('\\'),
                        Expr::Alt({Expr::CodePoints(normalize_ranges({{'"', '"'}, {'\\', '\\'}, {'/', '/'},
                                                                      {'b', 'b'}, {'f', 'f'}, {'n', 'n'},
                                                                      {'r', 'r'}, {'t', 't'}})),
                                   u})});
    } else {
      Expr int_part = Expr::Alt({Expr::Char('0'), Expr::Seq({digits('1', '9'),
                                                             Expr::Repeat(digits('0', '9'), 0, options_.max_integer_digits - 1)})});
      body = Expr::Seq({Expr::Optional(Expr::Char('-')), int_part,
                        Expr::Optional(Expr::Seq({Expr::Char('.'), Expr::Repeat(digits('0', '9'), 1, options_.max_fraction_digits)})),
                        Expr::Optional(Expr::Seq({Expr::CodePoints({{'E', 'E'}, {'e', 'e'}}),
                                                  Expr::Optional(Expr::CodePoints({{'+', '+'}, {'-', '-'}})),
                                                  Expr::Repeat(digits('0', '9'), 1, options_.max_exponent_digits)}))});
    }
    const Status st = b_.define(id, body);
    if (!st.ok()) deferred_error_ = st;
    return id;
  }

  // `body` as a rule of its own (so that repeating it does not copy it).
  Result<Expr> named(const std::string& path, const Expr& body) {
    const uint32_t id = b_.declare(path + "@" + std::to_string(n_named_++));
    DI_RETURN_IF_ERROR(b_.define(id, body));
    return Expr::Ref(id);
  }

  Status check_keywords(const json& s, const std::string& path) {
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (kUnsupported.count(it.key())) {
        return Status::Error("unsupported JSON Schema keyword " + quoted(it.key()) + " at " + path);
      }
    }
    return Status::Ok();
  }

  static bool is_annotation(const std::string& k) {
    // title, description, default, examples, $schema, $defs, deprecated, ... and non-standard ones
    return !(kObjectKeywords.count(k) || kArrayKeywords.count(k) || kStringKeywords.count(k) ||
             kNumberKeywords.count(k) || kOtherKeywords.count(k) || kUnsupported.count(k));
  }

  // The schema a local "$ref" points to.
  Result<const json*> resolve(const json& ref, const std::string& path) {
    if (!ref.is_string()) return Status::Error("'$ref' at " + path + " is not a string");
    const std::string r = ref.get<std::string>();
    if (r.empty() || r[0] != '#') {
      return Status::Error("'$ref' " + quoted(r) + " at " + path +
                           ": only local references ('#/...') are supported");
    }
    if (r.size() > 1 && r[1] != '/') {
      return Status::Error("'$ref' " + quoted(r) + " at " + path + ": anchors are not supported");
    }
    const json* at = &root_;
    size_t i = 1;
    while (i < r.size()) {
      size_t end = r.find('/', i + 1);
      if (end == std::string::npos) end = r.size();
      std::string token;
      for (size_t k = i + 1; k < end; ++k) {
        if (r[k] == '~' && k + 1 < end && (r[k + 1] == '0' || r[k + 1] == '1')) {
          token += r[k + 1] == '0' ? '~' : '/';
          ++k;
        } else if (r[k] == '%' && k + 2 < end && std::isxdigit(uint8_t(r[k + 1])) && std::isxdigit(uint8_t(r[k + 2]))) {
          token += char(std::stoi(r.substr(k + 1, 2), nullptr, 16));
          k += 2;
        } else {
          token += r[k];
        }
      }
      if (at->is_object() && at->contains(token)) {
        at = &(*at)[token];
      } else if (at->is_array() && !token.empty() && token.find_first_not_of("0123456789") == std::string::npos &&
                 token.size() < 10 && std::stoul(token) < at->size()) {
        at = &(*at)[std::stoul(token)];
      } else {
        return Status::Error("'$ref' " + quoted(r) + " at " + path + " points to nothing");
      }
      i = end;
    }
    return at;
  }

  bool has_constraints(const json& s, const std::set<std::string>& except) {
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (!is_annotation(it.key()) && !except.count(it.key())) return true;
    }
    return false;
  }

  // The schema as one object without a top-level $ref or allOf: referenced and allOf schemas
  // merged into it.
  Result<json> flatten(const json& s, const std::string& path, size_t depth) {
    if (depth > options_.max_schema_depth) return Status::Error("schema nested too deeply at " + path);
    if (s.is_boolean()) {
      if (s.get<bool>()) return json::object();
      return Status::Error("schema 'false' at " + path + " admits no value");
    }
    if (!s.is_object()) return Status::Error("schema at " + path + " is not an object or boolean");
    DI_RETURN_IF_ERROR(check_keywords(s, path));
    json out = json::object();
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (it.key() != "$ref" && it.key() != "allOf") out[it.key()] = it.value();
    }
    if (s.contains("$ref")) {
      DI_ASSIGN_OR_RETURN(const json* target, resolve(s["$ref"], path));
      DI_ASSIGN_OR_RETURN(json t, flatten(*target, s["$ref"].get<std::string>(), depth + 1));
      DI_ASSIGN_OR_RETURN(out, merge(localize_unevaluated(std::move(t)), out, path));
    }
    if (s.contains("allOf")) {
      const json& all = s["allOf"];
      if (!all.is_array() || all.empty()) return Status::Error("'allOf' at " + path + " is not a non-empty array");
      for (size_t i = 0; i < all.size(); ++i) {
        DI_ASSIGN_OR_RETURN(json t, flatten(all[i], path + "/allOf/" + std::to_string(i), depth + 1));
        DI_ASSIGN_OR_RETURN(out, merge(out, localize_unevaluated(std::move(t)), path));
      }
    }
    return out;
  }

  // A flattened subschema about to be merged into another: its unevaluatedProperties /
  // unevaluatedItems see only its own properties and items (its scope), so they become
  // additionalProperties / the items after its prefix before the merge mixes scopes.
  static json localize_unevaluated(json t) {
    if (t.contains("unevaluatedProperties")) {
      if (!t.contains("additionalProperties")) t["additionalProperties"] = t["unevaluatedProperties"];
      t.erase("unevaluatedProperties");
    }
    if (t.contains("unevaluatedItems")) {
      if (!t.contains("items") && !t.contains("additionalItems")) t["items"] = t["unevaluatedItems"];
      t.erase("unevaluatedItems");
    }
    return t;
  }

  static unsigned type_bits_of(const json& t) {
    static const std::map<std::string, unsigned> kTypes = {
        {"null", kNull}, {"boolean", kBoolean}, {"object", kObject}, {"array", kArray},
        {"string", kString}, {"integer", kInteger}, {"number", kInteger | kNumber}};
    unsigned bits = 0;
    auto add = [&](const json& name) {
      if (!name.is_string() || !kTypes.count(name.get<std::string>())) return false;
      bits |= kTypes.at(name.get<std::string>());
      return true;
    };
    if (t.is_array()) {
      for (const json& n : t) {
        if (!add(n)) return 0;
      }
      return bits;
    }
    return add(t) ? bits : 0;
  }

  // The types a flattened schema admits.
  Result<unsigned> admitted_types(const json& s, const std::string& path) {
    unsigned bits = kAnyType;
    if (s.contains("type")) {
      bits = type_bits_of(s["type"]);
      if (bits == 0) return Status::Error("'type' at " + path + " is not a JSON Schema type or list of types");
    } else {
      unsigned inferred = 0;
      for (auto it = s.begin(); it != s.end(); ++it) {
        if (kObjectKeywords.count(it.key())) inferred |= kObject;
        if (kArrayKeywords.count(it.key())) inferred |= kArray;
        if (kStringKeywords.count(it.key())) inferred |= kString;
        if (kNumberKeywords.count(it.key())) inferred |= kInteger | kNumber;
      }
      if (inferred) bits = inferred;
    }
    if (s.contains("const") || s.contains("enum")) {
      unsigned values = 0;
      if (s.contains("const")) values |= value_type(s["const"]);
      if (s.contains("enum") && s["enum"].is_array()) {
        for (const json& v : s["enum"]) values |= value_type(v);
      }
      bits &= values | ((values & kInteger) ? unsigned(kNumber) : 0u);
    }
    return bits;
  }

  Result<json> merge(json a, const json& b, const std::string& path) {
    auto declared = [](const json& s) {
      std::set<std::string> names;
      if (s.contains("properties") && s["properties"].is_object()) {
        for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it) names.insert(it.key());
      }
      return names;
    };
    const bool a_closed = a.contains("additionalProperties") && a["additionalProperties"] != json(true);
    const bool b_closed = b.contains("additionalProperties") && b["additionalProperties"] != json(true);
    const std::set<std::string> a_names = declared(a), b_names = declared(b);
    if ((a_closed && !std::includes(a_names.begin(), a_names.end(), b_names.begin(), b_names.end())) ||
        (b_closed && !std::includes(b_names.begin(), b_names.end(), a_names.begin(), a_names.end()))) {
      return Status::Error("'allOf' at " + path +
                           ": 'additionalProperties' in one branch with other properties in another is not supported");
    }
    // items after a prefix count from that schema's own prefix: they do not combine across.
    auto tuple_part = [](const json& s) {
      return json{{"prefixItems", s.value("prefixItems", json())}, {"items", s.value("items", json())},
                  {"additionalItems", s.value("additionalItems", json())}};
    };
    const bool a_tuple = a.contains("prefixItems") || a.contains("additionalItems") || (a.contains("items") && a["items"].is_array());
    const bool b_tuple = b.contains("prefixItems") || b.contains("additionalItems") || (b.contains("items") && b["items"].is_array());
    const bool a_items = a.contains("items") || a.contains("prefixItems") || a.contains("additionalItems");
    const bool b_items = b.contains("items") || b.contains("prefixItems") || b.contains("additionalItems");
    if ((a_tuple || b_tuple) && a_items && b_items && tuple_part(a) != tuple_part(b)) {
      return Status::Error("'allOf' at " + path + ": item schemas with a prefix in more than one branch are not supported");
    }
    for (auto it = b.begin(); it != b.end(); ++it) {
      const std::string& k = it.key();
      const json& v = it.value();
      if (!a.contains(k) || is_annotation(k)) {
        if (!a.contains(k)) a[k] = v;
        continue;
      }
      json& mine = a[k];
      if (mine == v) continue;
      if (k == "properties" && mine.is_object() && v.is_object()) {
        for (auto p = v.begin(); p != v.end(); ++p) {
          if (mine.contains(p.key()) && mine[p.key()] != p.value()) {
            mine[p.key()] = json{{"allOf", json::array({mine[p.key()], p.value()})}};
          } else {
            mine[p.key()] = p.value();
          }
        }
      } else if (k == "required" && mine.is_array() && v.is_array()) {
        for (const json& r : v) {
          if (std::find(mine.begin(), mine.end(), r) == mine.end()) mine.push_back(r);
        }
      } else if (k == "type") {
        unsigned bits = type_bits_of(mine) & type_bits_of(v);
        if (bits == 0) return Status::Error("'allOf' at " + path + ": the branches' types do not intersect");
        json types = json::array();
        for (auto [bit, name] : {std::pair{kNull, "null"}, {kBoolean, "boolean"}, {kObject, "object"},
                                 {kArray, "array"}, {kString, "string"}}) {
          if (bits & bit) types.push_back(name);
        }
        if (bits & kNumber) {
          types.push_back("number");
        } else if (bits & kInteger) {
          types.push_back("integer");
        }
        mine = types.size() == 1 ? types[0] : types;
      } else if ((k == "minimum" || k == "exclusiveMinimum" || k == "minLength" || k == "minItems" ||
                  k == "minProperties") && mine.is_number() && v.is_number()) {
        if (v > mine) mine = v;
      } else if ((k == "maximum" || k == "exclusiveMaximum" || k == "maxLength" || k == "maxItems" ||
                  k == "maxProperties") && mine.is_number() && v.is_number()) {
        if (v < mine) mine = v;
      } else {
        return Status::Error("'allOf' at " + path + ": the branches set " + quoted(k) +
                             " differently, which is not supported");
      }
    }
    return a;
  }

  Result<Expr> compile(const json& s, const std::string& path, size_t depth) {
    if (depth > options_.max_schema_depth) return Status::Error("schema nested too deeply at " + path);
    if (s.is_boolean()) {
      if (s.get<bool>()) return Expr::Ref(value_rule(kAnyType));
      return Status::Error("schema 'false' at " + path + " admits no value");
    }
    if (!s.is_object()) return Status::Error("schema at " + path + " is not an object or boolean");
    DI_RETURN_IF_ERROR(check_keywords(s, path));
    if (depth > 0 && (s.contains("$id") || s.contains("id"))) {
      // A nested $id would change what the $refs under it resolve against.
      return Status::Error("'$id' in a subschema at " + path + " is not supported");
    }
    if (s.contains("$ref") && !has_constraints(s, {"$ref"})) {
      const std::string ref = s["$ref"].is_string() ? s["$ref"].get<std::string>() : "";
      auto it = ref_rules_.find(ref);
      if (it != ref_rules_.end()) return Expr::Ref(it->second);
      DI_ASSIGN_OR_RETURN(const json* target, resolve(s["$ref"], path));
      const uint32_t id = b_.declare("ref " + ref);
      ref_rules_.emplace(ref, id);
      DI_ASSIGN_OR_RETURN(Expr body, compile(*target, ref, depth + 1));
      DI_RETURN_IF_ERROR(b_.define(id, body));
      return Expr::Ref(id);
    }
    if (s.contains("$ref") || s.contains("allOf")) {
      DI_ASSIGN_OR_RETURN(json flat, flatten(s, path, depth));
      return compile(flat, path, depth + 1);
    }
    if (s.contains("anyOf") || s.contains("oneOf")) return compile_branches(s, path, depth);
    DI_ASSIGN_OR_RETURN(unsigned types, admitted_types(s, path));
    if (s.contains("enum") || s.contains("const")) return compile_values(s, types, path);
    std::vector<Expr> options;
    if (types & kNull) options.push_back(Expr::Literal("null"));
    if (types & kBoolean) options.push_back(Expr::Alt({Expr::Literal("true"), Expr::Literal("false")}));
    if (types & kString) {
      DI_ASSIGN_OR_RETURN(Expr e, compile_string(s, path));
      options.push_back(std::move(e));
    }
    if (types & (kInteger | kNumber)) {
      DI_ASSIGN_OR_RETURN(Expr e, compile_number(s, (types & kNumber) == 0, path));
      options.push_back(std::move(e));
    }
    if (types & kObject) {
      DI_ASSIGN_OR_RETURN(Expr e, compile_object(s, path, depth));
      options.push_back(std::move(e));
    }
    if (types & kArray) {
      DI_ASSIGN_OR_RETURN(Expr e, compile_array(s, path, depth));
      options.push_back(std::move(e));
    }
    if (options.empty()) return Status::Error("schema at " + path + " admits no value");
    return Expr::Alt(std::move(options));
  }

  Result<Expr> compile_branches(const json& s, const std::string& path, size_t depth) {
    if (s.contains("anyOf") && s.contains("oneOf")) {
      return Status::Error("'anyOf' together with 'oneOf' at " + path + " is not supported");
    }
    const std::string key = s.contains("anyOf") ? "anyOf" : "oneOf";
    const json& branches = s[key];
    if (!branches.is_array() || branches.empty()) {
      return Status::Error(quoted(key) + " at " + path + " is not a non-empty array");
    }
    json siblings = json::object();
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (it.key() != key && !is_annotation(it.key())) siblings[it.key()] = it.value();
    }
    std::vector<json> flat;
    for (size_t i = 0; i < branches.size(); ++i) {
      const std::string bpath = path + "/" + key + "/" + std::to_string(i);
      if (branches[i] == json(false)) continue;  // matches nothing: never the branch taken
      if (siblings.empty() && key == "anyOf") {
        flat.push_back(branches[i]);
        continue;
      }
      DI_ASSIGN_OR_RETURN(json f, flatten(branches[i], bpath, depth + 1));
      f = localize_unevaluated(std::move(f));
      if (!siblings.empty()) {
        DI_ASSIGN_OR_RETURN(f, merge(siblings, f, bpath));
      }
      flat.push_back(std::move(f));
    }
    if (flat.empty()) return Status::Error("every branch of " + quoted(key) + " at " + path + " is 'false'");
    if (key == "oneOf") DI_RETURN_IF_ERROR(check_disjoint(flat, path));
    std::vector<Expr> options;
    for (size_t i = 0; i < flat.size(); ++i) {
      DI_ASSIGN_OR_RETURN(Expr e, compile(flat[i], path + "/" + key + "/" + std::to_string(i), depth + 1));
      options.push_back(std::move(e));
    }
    return Expr::Alt(std::move(options));
  }

  // oneOf is anyOf when no value can match two branches: here, when the branches admit disjoint
  // types, or all are objects with one required property whose const values differ.
  Status check_disjoint(const std::vector<json>& branches, const std::string& path) {
    std::vector<unsigned> types;
    bool disjoint = true;
    for (size_t i = 0; i < branches.size(); ++i) {
      DI_ASSIGN_OR_RETURN(unsigned t, admitted_types(branches[i], path + "/oneOf/" + std::to_string(i)));
      if (t & (kInteger | kNumber)) t |= kInteger | kNumber;
      for (unsigned u : types) disjoint = disjoint && (t & u) == 0;
      types.push_back(t);
    }
    if (disjoint) return Status::Ok();
    auto tag = [](const json& b, const std::string& p) -> const json* {
      if (!b.contains("properties") || !b["properties"].is_object() || !b["properties"].contains(p)) return nullptr;
      if (!b.contains("required") || !b["required"].is_array() ||
          std::find(b["required"].begin(), b["required"].end(), json(p)) == b["required"].end()) {
        return nullptr;
      }
      const json& ps = b["properties"][p];
      if (!ps.is_object()) return nullptr;
      if (ps.contains("const")) return &ps["const"];
      if (ps.contains("enum") && ps["enum"].is_array() && ps["enum"].size() == 1) return &ps["enum"][0];
      return nullptr;
    };
    if (branches[0].contains("properties") && branches[0]["properties"].is_object()) {
      for (auto it = branches[0]["properties"].begin(); it != branches[0]["properties"].end(); ++it) {
        std::vector<json> seen;
        bool ok = true;
        for (const json& b : branches) {
          const json* v = tag(b, it.key());
          if (!v || std::find(seen.begin(), seen.end(), *v) != seen.end()) {
            ok = false;
            break;
          }
          seen.push_back(*v);
        }
        if (ok) return Status::Ok();
      }
    }
    return Status::Error("'oneOf' at " + path +
                         ": branches may overlap (supported: disjoint types, or a required const property "
                         "that tells them apart)");
  }

  // raw: only the string values, as their raw text (values holding code points raw strings
  // leave out are dropped); may then be no option at all.
  Result<Expr> compile_values(const json& s, unsigned types, const std::string& path, bool raw = false) {
    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string& k = it.key();
      if (k != "enum" && k != "const" && k != "type" && !is_annotation(k)) {
        return Status::Error(quoted(k) + " alongside 'enum'/'const' at " + path + " is not supported");
      }
    }
    std::vector<json> values;
    if (s.contains("enum")) {
      if (!s["enum"].is_array()) return Status::Error("'enum' at " + path + " is not an array");
      for (const json& v : s["enum"]) values.push_back(v);
    }
    if (s.contains("const")) {
      if (s.contains("enum") && std::find(values.begin(), values.end(), s["const"]) == values.end()) {
        values.clear();
      } else {
        values = {s["const"]};
      }
    }
    std::vector<Expr> options;
    for (const json& v : values) {
      unsigned t = value_type(v);
      if (t == kInteger && (types & kNumber)) t = kNumber;
      if (!(types & value_type(v)) && !(types & t)) continue;
      if (!raw) {
        options.push_back(Expr::Literal(json_text(v)));
      } else if (v.is_string() && raw_writable(v.get<std::string>())) {
        options.push_back(Expr::Literal(v.get<std::string>()));
      }
    }
    if (raw && options.empty()) return Expr::CodePoints({});
    if (options.empty()) return Status::Error("no 'enum'/'const' value at " + path + " satisfies the schema's 'type'");
    return Expr::Alt(std::move(options));
  }

  Result<std::optional<uint64_t>> count_keyword(const json& s, const char* k, const std::string& path) {
    if (!s.contains(k)) return std::optional<uint64_t>();
    const json& v = s[k];
    if (!is_integral(v) || v.get<double>() < 0) {
      return Status::Error(quoted(k) + " at " + path + " is not a non-negative integer");
    }
    if (v.get<double>() > double(options_.limits.max_repeat)) {
      return Status::Error(quoted(k) + " at " + path + " exceeds the limit " + std::to_string(options_.limits.max_repeat));
    }
    return std::optional<uint64_t>(uint64_t(v.get<double>()));
  }

  bool raw_writable(const std::string& text) const {
    for (size_t i = 0; i < text.size();) {
      const uint8_t lead = uint8_t(text[i]);
      const size_t n = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
      char32_t c = n == 1 ? lead : lead & (0x7F >> n);
      for (size_t k = 1; k < n && i + k < text.size(); ++k) c = (c << 6) | (uint8_t(text[i + k]) & 0x3F);
      if (in_ranges(options_.escaped_code_points, c)) return false;
      i += n;
    }
    return true;
  }

  // `e` with every character class cut to `allowed`.
  static Expr restrict_code_points(const Expr& e, const CodePointRanges& allowed) {
    if (e.kind == Expr::Kind::kCodePoints) return Expr::CodePoints(intersect(normalize_ranges(e.ranges), allowed));
    Expr out = e;
    for (Expr& c : out.children) c = restrict_code_points(c, allowed);
    return out;
  }

  // The types a member's schema admits at its top ($ref and allOf merged; anyOf/oneOf: any).
  Result<unsigned> top_types(const json& s, const std::string& path) {
    if (!s.is_object()) return unsigned(kAnyType);
    json flat = s;
    if (s.contains("$ref") || s.contains("allOf")) {
      DI_ASSIGN_OR_RETURN(flat, flatten(s, path, 1));
    }
    if (flat.contains("anyOf") || flat.contains("oneOf")) return unsigned(kAnyType);
    return admitted_types(flat, path);
  }

  // The raw text of the strings schema `s` admits; nullopt when it admits none, or when they
  // are not listed here (strings under anyOf/oneOf).
  Result<std::optional<Expr>> raw_strings(const json& s, const std::string& path, size_t depth) {
    if (depth > options_.max_schema_depth) return Status::Error("schema nested too deeply at " + path);
    if (s.is_boolean()) {
      if (!s.get<bool>()) return std::optional<Expr>();
      return std::optional<Expr>(Expr::Repeat(Expr::CodePoints(raw_chars_), 0, kUnbounded));
    }
    if (!s.is_object()) return Status::Error("schema at " + path + " is not an object or boolean");
    DI_RETURN_IF_ERROR(check_keywords(s, path));
    if (s.contains("$ref") && !has_constraints(s, {"$ref"})) {
      DI_ASSIGN_OR_RETURN(const json* target, resolve(s["$ref"], path));
      return raw_strings(*target, s["$ref"].get<std::string>(), depth + 1);
    }
    if (s.contains("$ref") || s.contains("allOf")) {
      DI_ASSIGN_OR_RETURN(json flat, flatten(s, path, depth));
      return raw_strings(flat, path, depth + 1);
    }
    if (s.contains("anyOf") || s.contains("oneOf")) return std::optional<Expr>();
    DI_ASSIGN_OR_RETURN(unsigned types, admitted_types(s, path));
    if (!(types & kString)) return std::optional<Expr>();
    if (s.contains("enum") || s.contains("const")) {
      DI_ASSIGN_OR_RETURN(Expr e, compile_values(s, kString, path, /*raw=*/true));
      if (e.kind == Expr::Kind::kCodePoints && e.ranges.empty()) return std::optional<Expr>();
      return std::optional<Expr>(std::move(e));
    }
    DI_ASSIGN_OR_RETURN(Expr e, compile_string(s, path, /*raw=*/true));
    return std::optional<Expr>(std::move(e));
  }

  // A grammar whose root is schema `s` (a part of root_) as JSON text.
  Result<Grammar> root_of(const json& s, const std::string& path) {
    const uint32_t root = b_.declare("root");
    DI_ASSIGN_OR_RETURN(Expr body, compile(s, path, 1));
    DI_RETURN_IF_ERROR(b_.define(root, body));
    DI_RETURN_IF_ERROR(deferred_error_);
    return b_.build(root);
  }

  // A grammar of the raw strings of `s`, or nullopt (raw_strings).
  Result<std::optional<Grammar>> raw_root(const json& s, const std::string& path) {
    DI_ASSIGN_OR_RETURN(std::optional<Expr> body, raw_strings(s, path, 1));
    if (!body) return std::optional<Grammar>();
    const uint32_t root = b_.declare("root");
    DI_RETURN_IF_ERROR(b_.define(root, *body));
    DI_ASSIGN_OR_RETURN(Grammar g, b_.build(root));
    return std::optional<Grammar>(std::move(g));
  }

  // raw: the strings' raw text (unquoted, unescaped), without the code points of
  // options_.escaped_code_points.
  Result<Expr> compile_string(const json& s, const std::string& path, bool raw = false) {
    DI_ASSIGN_OR_RETURN(auto min_len, count_keyword(s, "minLength", path));
    DI_ASSIGN_OR_RETURN(auto max_len, count_keyword(s, "maxLength", path));
    const bool lengths = min_len || max_len;
    const bool pattern = s.contains("pattern"), format = s.contains("format");
    if (int(lengths) + int(pattern) + int(format) > 1) {
      return Status::Error("string at " + path +
                           ": only one of 'pattern', 'format' and 'minLength'/'maxLength' is supported");
    }
    if (pattern || format) {
      std::string regex;
      if (pattern) {
        if (!s["pattern"].is_string()) return Status::Error("'pattern' at " + path + " is not a string");
        regex = s["pattern"].get<std::string>();
      } else {
        if (!s["format"].is_string()) return Status::Error("'format' at " + path + " is not a string");
        auto r = format_regex(s["format"].get<std::string>());
        if (!r) return Status::Error("unsupported 'format' " + quoted(s["format"].get<std::string>()) + " at " + path);
        regex = std::string(*r);
      }
      auto e = parse_regex(regex, options_.limits);
      if (!e.ok()) return Status::Error("'pattern' at " + path + ": " + e.status().message());
      if (raw) return restrict_code_points(*e, raw_chars_);
      return Expr::Seq({Expr::Char('"'), escape_for_json(*e, escaped_), Expr::Char('"')});
    }
    if (!lengths && !raw) return Expr::Ref(value_rule(kString));
    const uint32_t lo = uint32_t(min_len.value_or(0));
    const uint32_t hi = max_len ? uint32_t(*max_len) : kUnbounded;
    if (hi < lo) return Status::Error("'maxLength' < 'minLength' at " + path);
    if (raw) return Expr::Repeat(Expr::CodePoints(raw_chars_), lo, hi);
    return Expr::Seq({Expr::Char('"'), Expr::Repeat(Expr::Ref(value_rule(kNull)), lo, hi), Expr::Char('"')});
  }

  Result<Expr> compile_number(const json& s, bool integer_only, const std::string& path) {
    constexpr double kMaxExact = 9007199254740992.0;  // 2^53
    std::optional<double> lo, hi;
    bool lo_exclusive = false, hi_exclusive = false;
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      if (!s.contains(k)) continue;
      const json& v = s[k];
      const bool is_min = k[0] == 'm' ? std::string(k) == "minimum" : std::string(k) == "exclusiveMinimum";
      if (v.is_boolean()) {  // draft 4: exclusiveMinimum/Maximum qualify minimum/maximum
        if (std::string(k).rfind("exclusive", 0) != 0) return Status::Error(quoted(k) + " at " + path + " is not a number");
        (is_min ? lo_exclusive : hi_exclusive) = v.get<bool>();
        continue;
      }
      if (!v.is_number()) return Status::Error(quoted(k) + " at " + path + " is not a number");
      const double d = v.get<double>();
      if (!(std::fabs(d) < kMaxExact)) return Status::Error(quoted(k) + " at " + path + " is out of range");
      if (!integer_only && d != std::floor(d)) {
        return Status::Error("non-integer bound " + quoted(k) + " at " + path + " is not supported for numbers");
      }
      const bool exclusive = std::string(k).rfind("exclusive", 0) == 0;
      if (is_min) {
        if (!lo || d > *lo || (d == *lo && exclusive)) {
          lo = d;
          lo_exclusive = exclusive;
        }
      } else if (!hi || d < *hi || (d == *hi && exclusive)) {
        hi = d;
        hi_exclusive = exclusive;
      }
    }
    if (s.contains("multipleOf")) {
      const json& m = s["multipleOf"];
      if (!(integer_only && m.is_number() && m.get<double>() == 1.0)) {
        return Status::Error("'multipleOf' at " + path + " is supported only as 1 on integers");
      }
    }
    std::optional<int64_t> int_lo, int_hi;
    if (lo) int_lo = int64_t(lo_exclusive ? std::floor(*lo) + 1 : std::ceil(*lo));
    if (hi) int_hi = int64_t(hi_exclusive ? std::ceil(*hi) - 1 : std::floor(*hi));
    const bool ints_empty = int_lo && int_hi && *int_lo > *int_hi;
    if (integer_only) {
      if (ints_empty) return Status::Error("no integer satisfies the bounds at " + path);
      return integer_range(int_lo, int_hi, options_.max_integer_digits);
    }
    if (!lo && !hi) return Expr::Ref(value_rule(kNumber));
    // Decimals i.f with f > 0 lie strictly between i and i+1 (or -i-1 and -i), so integral
    // bounds L, H hold for i in [max(L, 0), H - 1] (positive) and [max(0, -H), -L - 1] (negative),
    // inclusive or exclusive alike.
    std::vector<Expr> options;
    if (!ints_empty) options.push_back(integer_range(int_lo, int_hi, options_.max_integer_digits));
    Expr frac = Expr::Seq({Expr::Char('.'), Expr::Repeat(digits('0', '9'), 0, options_.max_fraction_digits - 1),
                           digits('1', '9')});
    const int64_t L = lo ? int64_t(*lo) : 0;
    const int64_t H = hi ? int64_t(*hi) : 0;
    const int64_t pos_lo = lo ? std::max<int64_t>(L, 0) : 0;
    if (!hi || pos_lo <= H - 1) {
      std::optional<int64_t> pos_hi;
      if (hi) pos_hi = H - 1;
      options.push_back(Expr::Seq({integer_range(pos_lo, pos_hi, options_.max_integer_digits), frac}));
    }
    const int64_t neg_lo = hi ? std::max<int64_t>(0, -H) : 0;
    if (!lo || neg_lo <= -L - 1) {
      std::optional<int64_t> neg_hi;
      if (lo) neg_hi = -L - 1;
      options.push_back(Expr::Seq({Expr::Char('-'), integer_range(neg_lo, neg_hi, options_.max_integer_digits), frac}));
    }
    if (options.empty()) return Status::Error("no number satisfies the bounds at " + path);
    return Expr::Alt(std::move(options));
  }

  // A string literal key that is none of `names` (which are plain ASCII), as JSON text.
  Result<Expr> other_key(const std::vector<std::string>& names, const std::string& path) {
    for (const std::string& n : names) {
      for (char c : n) {
        if (uint8_t(c) < 0x20 || uint8_t(c) >= 0x80 || c == '"' || c == '\\' || (c == '<' && options_.escape_less_than)) {
          return Status::Error("'additionalProperties' at " + path +
                               " beside properties with non-ASCII or escaped names is not supported");
        }
      }
    }
    // A trie over the names: at each node the key may end (unless a name ends there), continue
    // into a child, or leave the trie with any other character and continue freely.
    struct Node {
      std::map<char, size_t> children;
      bool terminal = false;
    };
    std::vector<Node> trie(1);
    for (const std::string& n : names) {
      size_t at = 0;
      for (char c : n) {
        auto it = trie[at].children.find(c);
        if (it == trie[at].children.end()) {
          trie[at].children[c] = trie.size();
          at = trie.size();
          trie.emplace_back();
        } else {
          at = it->second;
        }
      }
      trie[at].terminal = true;
    }
    const Expr chars = Expr::Repeat(Expr::Ref(value_rule(kNull)), 0, kUnbounded);
    const CodePointRanges& plain = plain_;
    std::vector<uint32_t> ids(trie.size());
    for (size_t i = 0; i < trie.size(); ++i) ids[i] = b_.declare(path + "@key" + std::to_string(n_named_) + "/" + std::to_string(i));
    ++n_named_;
    for (size_t i = 0; i < trie.size(); ++i) {
      std::vector<Expr> options;
      if (!trie[i].terminal) options.push_back(Expr::Empty());
      CodePointRanges children;
      for (auto [c, child] : trie[i].children) {
        options.push_back(Expr::Seq({Expr::Char(char32_t(c)), Expr::Ref(ids[child])}));
        children.push_back({char32_t(c), char32_t(c)});
      }
      CodePointRanges leave;
      const CodePointRanges kids = normalize_ranges(children);
      const CodePointRanges not_kids = complement_ranges(kids);
      for (auto [a, b] : plain) {
        for (auto [c, d] : not_kids) {
          if (std::max(a, c) <= std::min(b, d)) leave.push_back({std::max(a, c), std::min(b, d)});
        }
      }
      options.push_back(Expr::Seq({Expr::Alt({Expr::CodePoints(normalize_ranges(leave)),
                                              Expr::Ref(value_rule(kEscape))}),
                                   chars}));
      DI_RETURN_IF_ERROR(b_.define(ids[i], Expr::Alt(std::move(options))));
    }
    return Expr::Seq({Expr::Char('"'), Expr::Ref(ids[0]), Expr::Char('"')});
  }

  struct Property {
    std::string name;
    const json* schema;
    bool required;
  };
  // An object schema's members as the grammar emits them: the properties in order, and the
  // schema of additional ones (nullptr when none are emitted).
  struct ObjectLayout {
    std::vector<Property> props;
    const json* extra = nullptr;
  };

  Result<ObjectLayout> object_layout(const json& s, const std::string& path) {
    std::vector<Property> props;
    static const json kTrue = true;
    const json* extra = nullptr;  // schema of additional properties, nullptr when none are emitted
    const bool has_props = s.contains("properties");
    if (has_props && !s["properties"].is_object()) return Status::Error("'properties' at " + path + " is not an object");
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return Status::Error("'required' at " + path + " is not an array");
      for (const json& r : s["required"]) {
        if (!r.is_string()) return Status::Error("'required' at " + path + " holds a non-string");
        required.insert(r.get<std::string>());
      }
    }
    // With no applicator left (allOf and $ref are merged in, anyOf/oneOf distributed), the
    // properties evaluated are the declared ones: unevaluatedProperties acts as
    // additionalProperties, and is moot beside it.
    const char* ap_key = s.contains("additionalProperties") || !s.contains("unevaluatedProperties")
                             ? "additionalProperties" : "unevaluatedProperties";
    if (s.contains(ap_key)) {
      const json& ap = s[ap_key];
      if (!(ap.is_boolean() && !ap.get<bool>())) extra = &ap;
    } else if (!has_props || s["properties"].empty()) {
      extra = &kTrue;
    }
    if (has_props) {
      for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it) {
        const bool req = required.count(it.key()) > 0;
        if (it.value().is_boolean() && !it.value().get<bool>()) {
          if (req) return Status::Error("required property " + quoted(it.key()) + " at " + path + " has schema 'false'");
          continue;
        }
        props.push_back({it.key(), &it.value(), req});
      }
    }
    for (const std::string& r : required) {
      if (has_props && s["properties"].contains(r)) continue;
      if (!extra) {
        return Status::Error("required property " + quoted(r) + " at " + path + " is not allowed by 'additionalProperties'");
      }
      props.push_back({r, extra, true});
    }
    DI_ASSIGN_OR_RETURN(auto min_props, count_keyword(s, "minProperties", path));
    DI_ASSIGN_OR_RETURN(auto max_props, count_keyword(s, "maxProperties", path));
    size_t n_required = 0;
    for (const Property& p : props) n_required += p.required;
    if (min_props && *min_props > n_required) {
      // Require optional properties, in order, until enough are certain to appear.
      for (Property& p : props) {
        if (n_required >= *min_props) break;
        if (!p.required) {
          p.required = true;
          ++n_required;
        }
      }
      if (n_required < *min_props) {
        return Status::Error("'minProperties' at " + path + " exceeds the properties the schema declares");
      }
    }
    if (max_props) {
      if (n_required > *max_props) return Status::Error("'maxProperties' at " + path + " is below the required properties");
      extra = nullptr;
      size_t optional_left = *max_props - n_required;
      std::vector<Property> kept;
      for (const Property& p : props) {
        if (p.required || optional_left > 0) {
          if (!p.required) --optional_left;
          kept.push_back(p);
        }
      }
      props = std::move(kept);
    }
    return ObjectLayout{std::move(props), extra};
  }

  // patternProperties alone (one pattern; no properties, required or min/maxProperties): the
  // object {} or one member whose key matches the pattern whole (a search match, as patterns
  // are) and whose value its schema admits. Whatever additionalProperties says of other keys,
  // none is emitted, and one member never repeats a key: a subset of the schema's objects.
  Result<Expr> compile_pattern_object(const json& s, const std::string& path, size_t depth) {
    const json& pp = s["patternProperties"];
    if (!pp.is_object() || pp.size() != 1 || (s.contains("properties") && !s["properties"].empty()) ||
        s.contains("required") || s.contains("minProperties") || s.contains("maxProperties")) {
      return Status::Error("'patternProperties' at " + path +
                           " is supported only as one pattern, without 'properties', 'required' or "
                           "'minProperties'/'maxProperties'");
    }
    const std::string ppath = path + "/patternProperties";
    auto key = parse_regex(pp.begin().key(), options_.limits);
    if (!key.ok()) return Status::Error("'patternProperties' pattern at " + ppath + ": " + key.status().message());
    DI_ASSIGN_OR_RETURN(Expr value, compile(pp.begin().value(), ppath + "/" + pp.begin().key(), depth + 1));
    Expr member = Expr::Seq({Expr::Char('"'), escape_for_json(*key, escaped_), Expr::Char('"'), colon(), value});
    return Expr::Seq({Expr::Char('{'), Expr::Optional(std::move(member)), Expr::Char('}')});
  }

  Result<Expr> compile_object(const json& s, const std::string& path, size_t depth) {
    if (s.contains("patternProperties")) return compile_pattern_object(s, path, depth);
    DI_ASSIGN_OR_RETURN(ObjectLayout layout, object_layout(s, path));
    const std::vector<Property>& props = layout.props;
    const json* extra = layout.extra;
    // kv_i, then R(i, first) over the properties in order; E(first) for the additional ones.
    std::vector<Expr> kv;
    for (size_t i = 0; i < props.size(); ++i) {
      const std::string ppath = path + "/properties/" + props[i].name;
      DI_ASSIGN_OR_RETURN(Expr value, compile(*props[i].schema, ppath, depth + 1));
      DI_ASSIGN_OR_RETURN(Expr e, named(ppath, Expr::Seq({Expr::Literal(json_text(json(props[i].name))), colon(), value})));
      kv.push_back(std::move(e));
    }
    std::optional<Expr> extra_kv;
    if (extra) {
      std::vector<std::string> names;
      for (const Property& p : props) names.push_back(p.name);
      DI_ASSIGN_OR_RETURN(Expr key, other_key(names, path));
      DI_ASSIGN_OR_RETURN(Expr value, compile(*extra, path + "/additionalProperties", depth + 1));
      DI_ASSIGN_OR_RETURN(Expr e, named(path + "/additionalProperties", Expr::Seq({key, colon(), value})));
      extra_kv = std::move(e);
    }
    const size_t n = props.size();
    std::vector<uint32_t> rules(2 * (n + 1));
    for (size_t i = 0; i <= n; ++i) {
      for (int first = 0; first < 2; ++first) {
        rules[2 * i + first] = b_.declare(path + "@obj" + std::to_string(n_named_) + "/" +
                                          std::to_string(i) + (first ? "f" : "r"));
      }
    }
    ++n_named_;
    for (size_t i = 0; i <= n; ++i) {
      for (int first = 0; first < 2; ++first) {
        Expr body;
        if (i == n) {
          if (extra_kv) {
            // E(first) ::= "" | [sep] kv E(false)
            std::vector<Expr> seq;
            if (!first) seq.push_back(sep());
            seq.push_back(*extra_kv);
            seq.push_back(Expr::Ref(rules[2 * n]));
            body = Expr::Alt({Expr::Empty(), Expr::Seq(std::move(seq))});
          }
        } else {
          std::vector<Expr> seq;
          if (!first) seq.push_back(sep());
          seq.push_back(kv[i]);
          seq.push_back(Expr::Ref(rules[2 * (i + 1)]));
          Expr take = Expr::Seq(std::move(seq));
          body = props[i].required ? std::move(take)
                                   : Expr::Alt({std::move(take), Expr::Ref(rules[2 * (i + 1) + first])});
        }
        DI_RETURN_IF_ERROR(b_.define(rules[2 * i + first], body));
      }
    }
    return Expr::Seq({Expr::Char('{'), Expr::Ref(rules[1]), Expr::Char('}')});
  }

  Result<Expr> compile_array(const json& s, const std::string& path, size_t depth) {
    std::vector<const json*> prefix;
    static const json kTrue = true;
    const json* rest = &kTrue;
    std::string rest_path = path + "/items";
    auto take_prefix = [&](const json& arr, const char* k) -> Status {
      if (!arr.is_array()) return Status::Error(quoted(k) + " at " + path + " is not an array");
      for (const json& p : arr) prefix.push_back(&p);
      return Status::Ok();
    };
    if (s.contains("prefixItems")) {
      DI_RETURN_IF_ERROR(take_prefix(s["prefixItems"], "prefixItems"));
      if (s.contains("items")) rest = &s["items"];
      if (s.contains("additionalItems")) return Status::Error("'additionalItems' with 'prefixItems' at " + path + " is not supported");
    } else if (s.contains("items") && s["items"].is_array()) {
      DI_RETURN_IF_ERROR(take_prefix(s["items"], "items"));
      if (s.contains("additionalItems")) {
        rest = &s["additionalItems"];
        rest_path = path + "/additionalItems";
      }
    } else if (s.contains("items")) {
      rest = &s["items"];
    }
    // As for objects: with nothing else evaluating items, unevaluatedItems is the rest's schema.
    if (s.contains("unevaluatedItems") && !s.contains("items") && !s.contains("additionalItems")) {
      rest = &s["unevaluatedItems"];
      rest_path = path + "/unevaluatedItems";
    }
    DI_ASSIGN_OR_RETURN(auto min_items, count_keyword(s, "minItems", path));
    DI_ASSIGN_OR_RETURN(auto max_items, count_keyword(s, "maxItems", path));
    if (s.contains("uniqueItems") && s["uniqueItems"] != json(false) && !(max_items && *max_items <= 1)) {
      return Status::Error("'uniqueItems' at " + path + " is not supported");
    }
    const uint64_t lo = min_items.value_or(0);
    if (max_items && *max_items < lo) return Status::Error("'maxItems' < 'minItems' at " + path);
    size_t n_prefix = max_items ? std::min<size_t>(prefix.size(), *max_items) : prefix.size();
    bool rest_none = rest->is_boolean() && !rest->get<bool>();
    for (size_t i = 0; i < n_prefix; ++i) {
      if (*prefix[i] == json(false)) {  // no item can stand here: the array ends before it
        n_prefix = i;
        rest_none = true;
      }
    }
    const uint64_t rest_min = lo > n_prefix ? lo - n_prefix : 0;
    uint32_t rest_max = max_items ? uint32_t(*max_items - n_prefix) : kUnbounded;
    if (rest_none) {
      if (rest_min > 0) return Status::Error("'minItems' at " + path + " exceeds the items the schema allows");
      rest_max = 0;
    }
    std::vector<Expr> seq{Expr::Char('[')};
    for (size_t i = 0; i < n_prefix; ++i) {
      const std::string ipath = path + "/prefixItems/" + std::to_string(i);
      DI_ASSIGN_OR_RETURN(Expr item, compile(*prefix[i], ipath, depth + 1));
      DI_ASSIGN_OR_RETURN(item, named(ipath, item));
      if (i > 0) seq.push_back(sep());
      seq.push_back(std::move(item));
    }
    if (rest_max > 0) {
      DI_ASSIGN_OR_RETURN(Expr item, compile(*rest, rest_path, depth + 1));
      DI_ASSIGN_OR_RETURN(item, named(rest_path, item));
      Expr more = Expr::Seq({sep(), item});
      if (n_prefix > 0) {
        seq.push_back(Expr::Repeat(more, uint32_t(rest_min), rest_max));
      } else {
        const uint32_t tail_max = rest_max == kUnbounded ? kUnbounded : rest_max - 1;
        Expr items = Expr::Seq({item, Expr::Repeat(more, rest_min > 0 ? uint32_t(rest_min - 1) : 0, tail_max)});
        seq.push_back(rest_min > 0 ? std::move(items) : Expr::Optional(std::move(items)));
      }
    }
    seq.push_back(Expr::Char(']'));
    return Expr::Seq(std::move(seq));
  }

  const json& root_;
  JsonSchemaOptions options_;
  GrammarBuilder b_;
  CodePointRanges escaped_;  // code points strings write as escapes
  CodePointRanges plain_;    // the others
  CodePointRanges raw_chars_;  // code points raw strings may hold
  json flat_root_;           // members(): the root with $ref and allOf merged
  std::map<unsigned, uint32_t> shared_;
  std::map<std::string, uint32_t> ref_rules_;
  size_t n_named_ = 0;
  Status deferred_error_;

 public:
  const Status& deferred_error() const { return deferred_error_; }
};

}  // namespace

Result<Grammar> compile_json_schema(const json& schema, const JsonSchemaOptions& options) {
  Compiler c(schema, options);
  auto g = c.run();
  if (!c.deferred_error().ok()) return c.deferred_error();
  return g;
}

Result<std::vector<ObjectMember>> compile_object_members(const json& schema, const JsonSchemaOptions& options) {
  Compiler c(schema, options);
  return c.members();
}

Grammar any_json_object_grammar(const JsonSchemaOptions& options) {
  static const json kEmpty = json::object();
  Compiler c(kEmpty, options);
  auto g = c.any_object();
  return std::move(g).value();
}

}  // namespace deepinfer::grammar
