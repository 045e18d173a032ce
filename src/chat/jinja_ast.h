// The syntax tree of a parsed template: expressions (Expr) and statements (Node). Built once by
// the parser, then only read, so one tree serves concurrent renders.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace deepinfer::chat::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
using KeywordArgs = std::vector<std::pair<std::string, ExprPtr>>;

struct Expr {
  enum class Kind {
    kLiteral,    // literal
    kName,       // name
    kList,       // items: elements
    kTuple,      // items: elements
    kDict,       // items: key0, value0, key1, value1, ...
    kGetAttr,    // items[0].name
    kGetItem,    // items[0][items[1]]
    kSlice,      // items[0][items[1]:items[2]:items[3]], absent bounds are null
    kCall,       // items[0](items[1..], kwargs)
    kFilter,     // items[0] | name(items[1..], kwargs); items[0] is null inside {% filter %}
    kTest,       // items[0] is [not] name(items[1..], kwargs); negated
    kNeg,        // -items[0]
    kPos,        // +items[0]
    kNot,        // not items[0]
    kBinary,     // items[0] op items[1]; op one of + - * / // % ** ~
    kAnd,        // items[0] and items[1]
    kOr,         // items[0] or items[1]
    kCompare,    // items[0] ops[0] items[1] ops[1] items[2] ...; ops: == != < <= > >= in notin
    kCondition,  // items[1] if items[0] else items[2] (items[2] null: Undefined)
  };

  Kind kind;
  int line = 0;
  Value literal;
  std::string name;  // name, attribute, filter, test, or binary operator
  std::vector<ExprPtr> items;
  KeywordArgs kwargs;
  std::vector<std::string> ops;
  bool negated = false;
};

struct Node;
using Body = std::vector<Node>;

// A macro's parameter: its name and default (null: none).
struct MacroParam {
  std::string name;
  ExprPtr default_value;
};

struct Node {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // branches: (condition, body) for if/elif; else_body
    kFor,          // for targets in expr [if condition]: body [else: else_body]
    kSet,          // set targets = expr, or set ns.attr = expr (attribute non-empty)
    kSetBlock,     // set targets[0] [| filter] %}body{% endset; expr: filter chain or null
    kMacro,        // macro name(params): body
    kCallBlock,    // call(params) expr: body, passed to the call as `caller`
    kFilterBlock,  // filter expr: body (expr: filter chain applied to the body's text)
    kWith,         // with (targets[i] = values[i]): body
    kBreak,
    kContinue,
    kScope,        // a body rendered as is ({% generation %})
  };

  explicit Node(Kind k) : kind(k) {}

  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<std::string> targets;
  std::string attribute;
  std::vector<ExprPtr> values;
  std::string name;
  std::vector<MacroParam> params;
};

}  // namespace deepinfer::chat::jinja
