#include "chat/jinja_parser.h"

#include <initializer_list>
#include <set>

#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"
#include "chat/jinja_lexer.h"

namespace deepinfer::chat::jinja {
namespace {

using T = Token::Type;

// Deepest nesting of expressions and blocks accepted (guards the native stack when parsing and
// rendering; real templates nest a few levels).
constexpr int kMaxNesting = 256;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Body parse_root() {
    Body body = parse_body({});
    if (cur().type != T::kEnd) fail("unexpected tag");
    return body;
  }

 private:
  const Token& cur() const { return tokens_[pos_]; }
  const Token& peek(size_t n = 1) const { return tokens_[std::min(pos_ + n, tokens_.size() - 1)]; }
  void next() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }

  [[noreturn]] void fail(const std::string& what) const {
    std::string near;
    switch (cur().type) {
      case T::kEnd: near = "end of template"; break;
      case T::kBlockEnd: near = "'%}'"; break;
      case T::kVariableEnd: near = "'}}'"; break;
      case T::kData: near = "text"; break;
      default: near = "'" + cur().value + "'";
    }
    throw TemplateSyntaxError("line " + std::to_string(cur().line) + ": " + what + " (at " + near + ")");
  }

  bool is_op(std::string_view op) const { return cur().type == T::kOperator && cur().value == op; }
  bool is_name(std::string_view n) const { return cur().type == T::kName && cur().value == n; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail("expected '" + std::string(op) + "'");
  }
  void expect_block_end() {
    if (cur().type != T::kBlockEnd) fail("expected end of tag");
    next();
  }
  std::string expect_name() {
    if (cur().type != T::kName) fail("expected a name");
    std::string n = cur().value;
    next();
    return n;
  }

  // Parses nodes until a block tag whose name is in `end_names` (left unconsumed: the caller
  // reads the `{%` and the name) or the end of the template.
  Body parse_body(std::initializer_list<std::string_view> end_names) {
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == T::kEnd) {
        if (end_names.size() != 0) fail("missing {% " + std::string(*std::prev(end_names.end())) + " %}");
        return body;
      }
      if (t.type == T::kData) {
        Node n{Node::Kind::kText};
        n.line = t.line;
        n.text = t.value;
        body.push_back(std::move(n));
        next();
      } else if (t.type == T::kVariableBegin) {
        next();
        Node n{Node::Kind::kOutput};
        n.line = t.line;
        n.expr = parse_tuple(true);
        if (cur().type != T::kVariableEnd) fail("expected '}}'");
        next();
        body.push_back(std::move(n));
      } else if (t.type == T::kBlockBegin) {
        const Token& name = peek();
        if (name.type == T::kName) {
          for (std::string_view e : end_names) {
            if (name.value == e) return body;
          }
        }
        next();
        body.push_back(parse_statement());
      } else {
        fail("unexpected token");
      }
    }
  }

  // After `{% name ... %}` content, consumes `{% end_name %}`.
  void expect_end_tag(std::string_view end_name) {
    if (cur().type != T::kBlockBegin) fail("missing {% " + std::string(end_name) + " %}");
    next();
    if (!skip_name(end_name)) fail("expected {% " + std::string(end_name) + " %}");
    expect_block_end();
  }

  // Counts nesting for the scope of a parse call.
  struct Nest {
    explicit Nest(Parser& p) : parser(p) {
      if (++parser.nesting_ > kMaxNesting) parser.fail("template nested too deeply");
    }
    ~Nest() { --parser.nesting_; }
    Parser& parser;
  };

  Node parse_statement() {
    Nest nest(*this);
    const int line = cur().line;
    if (cur().type != T::kName) fail("expected a statement name");
    const std::string tag = cur().value;
    next();
    Node n{Node::Kind::kText};
    n.line = line;
    if (tag == "if") {
      n.kind = Node::Kind::kIf;
      while (true) {
        ExprPtr cond = parse_tuple(false);
        expect_block_end();
        Body body = parse_body({"elif", "else", "endif"});
        n.branches.emplace_back(std::move(cond), std::move(body));
        next();  // {%
        if (skip_name("elif")) continue;
        if (skip_name("else")) {
          expect_block_end();
          n.else_body = parse_body({"endif"});
          next();
          skip_name("endif");
        } else {
          skip_name("endif");
        }
        expect_block_end();
        return n;
      }
    }
    if (tag == "for") {
      n.kind = Node::Kind::kFor;
      n.targets = parse_name_targets();
      if (!skip_name("in")) fail("expected 'in' in for loop");
      n.expr = parse_tuple(false, {"recursive"});
      if (skip_name("if")) n.condition = parse_expression(true);
      if (is_name("recursive")) fail("unsupported construct: recursive for loops");
      expect_block_end();
      ++loop_depth_;
      n.body = parse_body({"endfor", "else"});
      --loop_depth_;
      next();
      if (skip_name("else")) {
        expect_block_end();
        n.else_body = parse_body({"endfor"});
        next();
      }
      skip_name("endfor");
      expect_block_end();
      return n;
    }
    if (tag == "set") {
      if (cur().type == T::kName && peek().type == T::kOperator && peek().value == ".") {
        n.kind = Node::Kind::kSet;
        n.targets = {expect_name()};
        next();
        n.attribute = expect_name();
        expect_op("=");
        n.expr = parse_tuple(true);
        expect_block_end();
        return n;
      }
      n.targets = parse_name_targets();
      if (skip_op("=")) {
        n.kind = Node::Kind::kSet;
        n.expr = parse_tuple(true);
        expect_block_end();
        return n;
      }
      if (n.targets.size() != 1) fail("a {% set %} block assigns one name");
      n.kind = Node::Kind::kSetBlock;
      if (is_op("|")) n.expr = parse_filters(nullptr);
      expect_block_end();
      n.body = parse_body({"endset"});
      expect_end_tag("endset");
      return n;
    }
    if (tag == "macro") {
      n.kind = Node::Kind::kMacro;
      n.name = expect_name();
      n.params = parse_params();
      expect_block_end();
      n.body = parse_body({"endmacro"});
      expect_end_tag("endmacro");
      return n;
    }
    if (tag == "call") {
      n.kind = Node::Kind::kCallBlock;
      if (is_op("(")) n.params = parse_params();
      n.expr = parse_expression(true);
      if (n.expr->kind != Expr::Kind::kCall) fail("expected a call in {% call %}");
      expect_block_end();
      n.body = parse_body({"endcall"});
      expect_end_tag("endcall");
      return n;
    }
    if (tag == "filter") {
      n.kind = Node::Kind::kFilterBlock;
      n.expr = parse_filters(nullptr, /*leading_pipe=*/false);
      expect_block_end();
      n.body = parse_body({"endfilter"});
      expect_end_tag("endfilter");
      return n;
    }
    if (tag == "with") {
      n.kind = Node::Kind::kWith;
      while (cur().type != T::kBlockEnd) {
        if (!n.targets.empty()) expect_op(",");
        n.targets.push_back(expect_name());
        expect_op("=");
        n.values.push_back(parse_expression(true));
      }
      expect_block_end();
      n.body = parse_body({"endwith"});
      expect_end_tag("endwith");
      return n;
    }
    if (tag == "generation") {
      n.kind = Node::Kind::kScope;
      expect_block_end();
      n.body = parse_body({"endgeneration"});
      expect_end_tag("endgeneration");
      return n;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail("'" + tag + "' outside a for loop");
      n.kind = tag == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
      expect_block_end();
      return n;
    }
    static const std::set<std::string> kUnsupported = {"extends", "block", "include", "import", "from",
                                                       "autoescape", "trans", "do", "raw"};
    if (kUnsupported.count(tag)) fail("unsupported construct: {% " + tag + " %}");
    fail("unknown tag '" + tag + "'");
  }

  // `a` or `a, b` or `(a, b)`.
  std::vector<std::string> parse_name_targets() {
    std::vector<std::string> names;
    const bool paren = skip_op("(");
    do {
      names.push_back(expect_name());
    } while (skip_op(","));
    if (paren) expect_op(")");
    return names;
  }

  std::vector<MacroParam> parse_params() {
    std::vector<MacroParam> params;
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      MacroParam p;
      p.name = expect_name();
      if (skip_op("=")) p.default_value = parse_expression(true);
      params.push_back(std::move(p));
    }
    expect_op(")");
    return params;
  }

  ExprPtr make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // Comma-separated expressions: one without a comma is itself, more make a tuple.
  ExprPtr parse_tuple(bool with_condition, std::initializer_list<std::string_view> extra_end = {},
                      bool explicit_parens = false) {
    const int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    auto at_end = [&] {
      if (cur().type == T::kVariableEnd || cur().type == T::kBlockEnd || cur().type == T::kEnd) return true;
      if (is_op(")") || is_op("]") || is_op("}")) return true;
      if (cur().type == T::kName) {
        for (std::string_view e : extra_end) {
          if (cur().value == e) return true;
        }
        if (!with_condition && cur().value == "if") return true;
      }
      return false;
    };
    while (true) {
      if (!items.empty()) {
        if (!skip_op(",")) break;
        is_tuple = true;
      }
      if (at_end()) break;
      items.push_back(parse_expression(with_condition));
    }
    if (!is_tuple && items.size() == 1) return std::move(items[0]);
    if (items.empty() && !explicit_parens) fail("expected an expression");
    auto t = make(Expr::Kind::kTuple, line);
    t->items = std::move(items);
    return t;
  }

  ExprPtr parse_expression(bool with_condition) { return with_condition ? parse_condition() : parse_or(); }

  ExprPtr parse_condition() {
    Nest nest(*this);
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      const int line = cur().line;
      next();
      auto c = make(Expr::Kind::kCondition, line);
      c->items.push_back(parse_or());
      c->items.push_back(std::move(expr));
      c->items.push_back(skip_name("else") ? parse_condition() : nullptr);
      expr = std::move(c);
    }
    return expr;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      auto e = make(Expr::Kind::kOr, cur().line);
      next();
      e->items.push_back(std::move(left));
      e->items.push_back(parse_and());
      left = std::move(e);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      auto e = make(Expr::Kind::kAnd, cur().line);
      next();
      e->items.push_back(std::move(left));
      e->items.push_back(parse_not());
      left = std::move(e);
    }
    return left;
  }

  ExprPtr parse_not() {
    Nest nest(*this);
    if (is_name("not")) {
      auto e = make(Expr::Kind::kNot, cur().line);
      next();
      e->items.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = cur().line;
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().type == T::kOperator &&
          (cur().value == "==" || cur().value == "!=" || cur().value == "<" || cur().value == "<=" ||
           cur().value == ">" || cur().value == ">=")) {
        op = cur().value;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && peek().type == T::kName && peek().value == "in") {
        op = "notin";
        next();
        next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(Expr::Kind::kCompare, line);
        cmp->items.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->items.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr binary(std::string op, ExprPtr left, ExprPtr right, int line) {
    auto e = make(Expr::Kind::kBinary, line);
    e->name = std::move(op);
    e->items.push_back(std::move(left));
    e->items.push_back(std::move(right));
    return e;
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const std::string op = cur().value;
      const int line = cur().line;
      next();
      left = binary(op, std::move(left), parse_concat(), line);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      const int line = cur().line;
      next();
      left = binary("~", std::move(left), parse_math2(), line);
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = cur().value;
      const int line = cur().line;
      next();
      left = binary(op, std::move(left), parse_pow(), line);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      const int line = cur().line;
      next();
      left = binary("**", std::move(left), parse_unary(true), line);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    Nest nest(*this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      auto e = make(is_op("-") ? Expr::Kind::kNeg : Expr::Kind::kPos, cur().line);
      next();
      e->items.push_back(parse_unary(false));
      node = std::move(e);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    const int line = t.line;
    if (t.type == T::kName) {
      const std::string& n = t.value;
      auto lit = make(Expr::Kind::kLiteral, line);
      if (n == "true" || n == "True") {
        lit->literal = Value::Bool(true);
      } else if (n == "false" || n == "False") {
        lit->literal = Value::Bool(false);
      } else if (n == "none" || n == "None") {
        lit->literal = Value::None();
      } else {
        auto name = make(Expr::Kind::kName, line);
        name->name = n;
        next();
        return name;
      }
      next();
      return lit;
    }
    if (t.type == T::kString) {
      std::string s;
      while (cur().type == T::kString) {
        s += cur().value;
        next();
      }
      auto lit = make(Expr::Kind::kLiteral, line);
      lit->literal = Value::String(std::move(s));
      return lit;
    }
    if (t.type == T::kInteger || t.type == T::kFloat) {
      auto lit = make(Expr::Kind::kLiteral, line);
      std::string text;
      for (char c : t.value) {
        if (c != '_') text.push_back(c);
      }
      try {
        if (t.type == T::kFloat) {
          lit->literal = Value::Float(std::stod(text));
        } else if (text.size() > 1 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
          lit->literal = Value::Int(std::stoll(text.substr(2), nullptr, 16));
        } else if (text.size() > 1 && text[0] == '0' && (text[1] == 'o' || text[1] == 'O')) {
          lit->literal = Value::Int(std::stoll(text.substr(2), nullptr, 8));
        } else if (text.size() > 1 && text[0] == '0' && (text[1] == 'b' || text[1] == 'B')) {
          lit->literal = Value::Int(std::stoll(text.substr(2), nullptr, 2));
        } else {
          lit->literal = Value::Int(std::stoll(text));
        }
      } catch (const std::exception&) {
        fail("number out of range");
      }
      next();
      return lit;
    }
    if (is_op("(")) {
      next();
      ExprPtr e = parse_tuple(true, {}, true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      auto list = make(Expr::Kind::kList, line);
      next();
      while (!is_op("]")) {
        if (!list->items.empty()) expect_op(",");
        if (is_op("]")) break;
        list->items.push_back(parse_expression(true));
      }
      expect_op("]");
      return list;
    }
    if (is_op("{")) {
      auto dict = make(Expr::Kind::kDict, line);
      next();
      while (!is_op("}")) {
        if (!dict->items.empty()) expect_op(",");
        if (is_op("}")) break;
        dict->items.push_back(parse_expression(true));
        expect_op(":");
        dict->items.push_back(parse_expression(true));
      }
      expect_op("}");
      return dict;
    }
    fail("unexpected token in expression");
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        node = parse_filters(std::move(node), true, /*single=*/true);
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const int line = cur().line;
    if (skip_op(".")) {
      if (cur().type == T::kName) {
        auto e = make(Expr::Kind::kGetAttr, line);
        e->name = cur().value;
        e->items.push_back(std::move(node));
        next();
        return e;
      }
      if (cur().type == T::kInteger) {
        auto e = make(Expr::Kind::kGetItem, line);
        e->items.push_back(std::move(node));
        auto idx = make(Expr::Kind::kLiteral, line);
        idx->literal = Value::Int(std::stoll(cur().value));
        e->items.push_back(std::move(idx));
        next();
        return e;
      }
      fail("expected an attribute name after '.'");
    }
    expect_op("[");
    ExprPtr start, stop, step;
    bool is_slice = false;
    if (!is_op(":")) start = parse_expression(true);
    if (skip_op(":")) {
      is_slice = true;
      if (!is_op("]") && !is_op(":")) stop = parse_expression(true);
      if (skip_op(":") && !is_op("]")) step = parse_expression(true);
    }
    if (is_op(",")) fail("unsupported construct: tuple subscripts");
    expect_op("]");
    if (!is_slice) {
      auto e = make(Expr::Kind::kGetItem, line);
      e->items.push_back(std::move(node));
      e->items.push_back(std::move(start));
      return e;
    }
    auto e = make(Expr::Kind::kSlice, line);
    e->items.push_back(std::move(node));
    e->items.push_back(std::move(start));
    e->items.push_back(std::move(stop));
    e->items.push_back(std::move(step));
    return e;
  }

  // `(args)` into e->items (after what is already there) and e->kwargs.
  void parse_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) fail("unsupported construct: *args and **kwargs in calls");
      if (cur().type == T::kName && peek().type == T::kOperator && peek().value == "=") {
        std::string key = cur().value;
        next();
        next();
        e.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!e.kwargs.empty()) fail("positional argument after keyword argument");
        e.items.push_back(parse_expression(true));
      }
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = make(Expr::Kind::kCall, cur().line);
    e->items.push_back(std::move(callee));
    parse_args(*e);
    return e;
  }

  // `| f(args) | g ...` applied to `node` (null inside {% filter %} and {% set %} blocks).
  ExprPtr parse_filters(ExprPtr node, bool leading_pipe = true, bool single = false) {
    bool first = true;
    while (first || is_op("|")) {
      if (leading_pipe || !first) expect_op("|");
      first = false;
      auto e = make(Expr::Kind::kFilter, cur().line);
      e->name = expect_name();
      while (is_op(".")) {
        next();
        e->name += "." + expect_name();
      }
      e->items.push_back(std::move(node));
      if (is_op("(")) parse_args(*e);
      node = std::move(e);
      if (single) break;
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    auto e = make(Expr::Kind::kTest, cur().line);
    next();  // is
    e->negated = skip_name("not");
    e->name = expect_name();
    while (is_op(".")) {
      next();
      e->name += "." + expect_name();
    }
    e->items.push_back(std::move(node));
    if (is_op("(")) {
      parse_args(*e);
    } else if ((cur().type == T::kName || cur().type == T::kString || cur().type == T::kInteger ||
                cur().type == T::kFloat || is_op("(") || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail("tests cannot be chained with 'is'");
      e->items.push_back(parse_postfix(parse_primary()));
    }
    return e;
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int loop_depth_ = 0;  // for-loop bodies being parsed, for break/continue
  int nesting_ = 0;     // see kMaxNesting
};

// Checks, after parsing, that every name the template calls or filters with is implemented.
class Validator {
 public:
  void check(const Body& body) {
    collect(body);
    walk(body);
  }

 private:
  [[noreturn]] static void fail(int line, const std::string& what) {
    throw TemplateSyntaxError("line " + std::to_string(line) + ": " + what);
  }

  void collect(const Body& body) {
    for (const Node& n : body) {
      if (n.kind == Node::Kind::kMacro) callable_names_.insert(n.name);
      for (const auto& t : n.targets) callable_names_.insert(t);
      for (const auto& p : n.params) callable_names_.insert(p.name);
      collect(n.body);
      collect(n.else_body);
      for (const auto& [cond, b] : n.branches) collect(b);
    }
  }

  void walk(const Body& body) {
    for (const Node& n : body) {
      expr(n.expr.get());
      expr(n.condition.get());
      for (const auto& v : n.values) expr(v.get());
      for (const auto& p : n.params) expr(p.default_value.get());
      for (const auto& [cond, b] : n.branches) {
        expr(cond.get());
        walk(b);
      }
      walk(n.body);
      walk(n.else_body);
    }
  }

  void expr(const Expr* e) {
    if (!e) return;
    switch (e->kind) {
      case Expr::Kind::kFilter:
        if (!is_filter(e->name)) fail(e->line, "unsupported filter '" + e->name + "'");
        check_named_argument(*e);
        break;
      case Expr::Kind::kTest:
        if (!is_test(e->name)) fail(e->line, "unsupported test '" + e->name + "'");
        break;
      case Expr::Kind::kBinary:
        if (e->name == "%" && e->items[0]->kind == Expr::Kind::kLiteral && e->items[0]->literal.is_string()) {
          fail(e->line, "unsupported construct: printf-style string formatting with '%'");
        }
        break;
      case Expr::Kind::kCall: {
        const Expr& callee = *e->items[0];
        if (callee.kind == Expr::Kind::kName && !is_global_function(callee.name) &&
            !callable_names_.count(callee.name) && callee.name != "caller") {
          fail(e->line, "unsupported function '" + callee.name + "'");
        }
        if (callee.kind == Expr::Kind::kGetAttr && !is_method(callee.name)) {
          fail(e->line, "unsupported method '" + callee.name + "'");
        }
        break;
      }
      default:
        break;
    }
    for (const auto& c : e->items) expr(c.get());
    for (const auto& [k, v] : e->kwargs) expr(v.get());
  }

  // map('filter'), select('test'), selectattr('attr', 'test'): the named filter or test must exist.
  static void check_named_argument(const Expr& e) {
    auto literal = [&](size_t i) -> const std::string* {
      if (e.items.size() <= i || !e.items[i] || e.items[i]->kind != Expr::Kind::kLiteral) return nullptr;
      return e.items[i]->literal.is_string() ? &e.items[i]->literal.as_string() : nullptr;
    };
    if (e.name == "map") {
      if (const std::string* f = literal(1); f && !is_filter(*f)) fail(e.line, "unsupported filter '" + *f + "'");
    } else if (e.name == "select" || e.name == "reject") {
      if (const std::string* t = literal(1); t && !is_test(*t)) fail(e.line, "unsupported test '" + *t + "'");
    } else if (e.name == "selectattr" || e.name == "rejectattr") {
      if (const std::string* t = literal(2); t && !is_test(*t)) fail(e.line, "unsupported test '" + *t + "'");
    }
  }

  std::set<std::string> callable_names_;
};

}  // namespace

Body parse_template(std::string_view source) {
  Parser parser(tokenize(source));
  Body body = parser.parse_root();
  Validator().check(body);
  return body;
}

}  // namespace deepinfer::chat::jinja
