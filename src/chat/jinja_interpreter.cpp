#include "chat/jinja_interpreter.h"

#include <cmath>

#include "chat/jinja_builtins.h"
#include "chat/jinja_error.h"
#include "chat/py_string.h"

namespace deepinfer::chat::jinja {
namespace {

// Nested macro calls allowed before rendering fails (guards the native stack).
constexpr int kMaxCallDepth = 200;

[[noreturn]] void error(const std::string& message) { throw RenderError(message); }

[[noreturn]] void unsupported_operands(const std::string& op, const Value& a, const Value& b) {
  error("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

int64_t checked(bool overflow, const int64_t& v) {  // v: read after the builtin wrote it
  if (overflow) error("integer overflow");
  return v;
}

void bind_targets(Frame& frame, const std::vector<std::string>& targets, const Value& value) {
  if (targets.size() == 1) {
    frame.vars[targets[0]] = value;
    return;
  }
  ValueList items = iterate(value);
  if (items.size() != targets.size()) {
    error("cannot unpack " + std::to_string(items.size()) + " values into " + std::to_string(targets.size()) +
          " names");
  }
  for (size_t i = 0; i < targets.size(); ++i) frame.vars[targets[i]] = items[i];
}

}  // namespace

void Interpreter::render(const Body& body, const std::shared_ptr<Frame>& root, std::string& out) {
  exec(body, root, out);
}

Interpreter::Flow Interpreter::exec(const Body& body, const FramePtr& frame, std::string& out) {
  for (const Node& node : body) {
    const Flow flow = exec_node(node, frame, out);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

std::string Interpreter::render_scoped(const Body& body, const FramePtr& frame) {
  auto scope = std::make_shared<Frame>();
  scope->parent = frame;
  std::string text;
  exec(body, scope, text);
  return text;
}

Interpreter::Flow Interpreter::exec_node(const Node& node, const FramePtr& frame, std::string& out) {
  switch (node.kind) {
    case Node::Kind::kText:
      out += node.text;
      return Flow::kNormal;
    case Node::Kind::kOutput:
      out += eval(*node.expr, frame).str();
      return Flow::kNormal;
    case Node::Kind::kIf:
      for (const auto& [cond, body] : node.branches) {
        if (eval(*cond, frame).truthy()) return exec(body, frame, out);
      }
      return exec(node.else_body, frame, out);
    case Node::Kind::kFor:
      exec_for(node, frame, out);
      return Flow::kNormal;
    case Node::Kind::kSet:
      exec_set(node, frame);
      return Flow::kNormal;
    case Node::Kind::kSetBlock: {
      Value text = Value::String(render_scoped(node.body, frame));
      if (node.expr) text = eval_filter(*node.expr, frame, &text);
      frame->vars[node.targets[0]] = text;
      return Flow::kNormal;
    }
    case Node::Kind::kMacro:
      frame->vars[node.name] = make_macro(node.name, node.params, node.body, frame);
      return Flow::kNormal;
    case Node::Kind::kCallBlock: {
      const Expr& call = *node.expr;
      Value callee = eval(*call.items[0], frame);
      require_defined(callee);
      if (!callee.is_callable()) error("'" + callee.type_name() + "' object is not callable");
      CallArgs args = eval_args(call, 1, frame);
      args.keyword.emplace_back("caller", make_macro("caller", node.params, node.body, frame));
      out += callee.call(args).str();
      return Flow::kNormal;
    }
    case Node::Kind::kFilterBlock: {
      const Value text = Value::String(render_scoped(node.body, frame));
      out += eval_filter(*node.expr, frame, &text).str();
      return Flow::kNormal;
    }
    case Node::Kind::kWith: {
      auto scope = std::make_shared<Frame>();
      scope->parent = frame;
      for (size_t i = 0; i < node.targets.size(); ++i) scope->vars[node.targets[i]] = eval(*node.values[i], frame);
      return exec(node.body, scope, out);
    }
    case Node::Kind::kScope:
      out += render_scoped(node.body, frame);
      return Flow::kNormal;
    case Node::Kind::kBreak:
      return Flow::kBreak;
    case Node::Kind::kContinue:
      return Flow::kContinue;
  }
  return Flow::kNormal;
}

void Interpreter::exec_for(const Node& node, const FramePtr& frame, std::string& out) {
  ValueList items = iterate(eval(*node.expr, frame));
  if (node.condition) {
    ValueList kept;
    for (Value& item : items) {
      auto probe = std::make_shared<Frame>();
      probe->parent = frame;
      bind_targets(*probe, node.targets, item);
      if (eval(*node.condition, probe).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    auto scope = std::make_shared<Frame>();
    scope->parent = frame;
    exec(node.else_body, scope, out);
    return;
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    auto scope = std::make_shared<Frame>();
    scope->parent = frame;
    bind_targets(*scope, node.targets, items[static_cast<size_t>(i)]);
    ValueDict loop;
    loop.set("index", Value::Int(i + 1));
    loop.set("index0", Value::Int(i));
    loop.set("revindex", Value::Int(n - i));
    loop.set("revindex0", Value::Int(n - i - 1));
    loop.set("first", Value::Bool(i == 0));
    loop.set("last", Value::Bool(i == n - 1));
    loop.set("length", Value::Int(n));
    loop.set("depth", Value::Int(1));
    loop.set("depth0", Value::Int(0));
    loop.set("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value::Undefined("there is no previous item"));
    loop.set("nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::Undefined("there is no next item"));
    loop.set("cycle", Value::Callable("cycle", [i](CallArgs& args) {
               if (args.positional.empty()) error("no items for cycling given");
               return args.positional[static_cast<size_t>(i) % args.positional.size()];
             }));
    scope->vars["loop"] = Value::Dict(std::move(loop));
    if (exec(node.body, scope, out) == Flow::kBreak) break;
  }
}

void Interpreter::exec_set(const Node& node, const FramePtr& frame) {
  Value value = eval(*node.expr, frame);
  if (!node.attribute.empty()) {
    Value target = lookup(node.targets[0], *frame);
    if (!target.is_namespace()) error("cannot assign attribute on non-namespace object");
    target.namespace_attrs().set(node.attribute, std::move(value));
    return;
  }
  bind_targets(*frame, node.targets, value);
}

Value Interpreter::make_macro(const std::string& name, const std::vector<MacroParam>& params, const Body& body,
                              const FramePtr& frame) {
  const std::vector<MacroParam>* ps = &params;
  const Body* b = &body;
  // Weak: the macro is stored in that frame, and a strong reference would make a cycle.
  std::weak_ptr<Frame> defining = frame;
  return Value::Callable(name, [this, name, ps, b, defining](CallArgs& args) -> Value {
    if (++call_depth_ > kMaxCallDepth) error("macro calls nested too deeply");
    auto scope = std::make_shared<Frame>();
    scope->parent = defining.lock();
    if (!scope->parent) error("macro '" + name + "' called after the scope that defined it ended");
    ValueList varargs;
    for (size_t i = 0; i < args.positional.size(); ++i) {
      if (i < ps->size()) {
        scope->vars[(*ps)[i].name] = args.positional[i];
      } else {
        varargs.push_back(args.positional[i]);
      }
    }
    ValueDict kwargs;
    for (auto& [key, value] : args.keyword) {
      bool is_param = false;
      for (const MacroParam& p : *ps) is_param = is_param || p.name == key;
      if (is_param || key == "caller") {
        scope->vars[key] = value;
      } else {
        kwargs.set(key, value);
      }
    }
    for (const MacroParam& p : *ps) {
      if (scope->vars.count(p.name)) continue;
      scope->vars[p.name] =
          p.default_value ? eval(*p.default_value, scope) : Value::Undefined("parameter '" + p.name + "' was not provided");
    }
    scope->vars["varargs"] = Value::Tuple(std::move(varargs));
    scope->vars["kwargs"] = Value::Dict(std::move(kwargs));
    std::string text;
    exec(*b, scope, text);
    --call_depth_;
    return Value::String(std::move(text));
  });
}

Value Interpreter::lookup(const std::string& name, const Frame& frame) const {
  for (const Frame* f = &frame; f; f = f->parent.get()) {
    auto it = f->vars.find(name);
    if (it != f->vars.end()) return it->second;
  }
  if (is_global_function(name)) return global_function(name);
  return Value::Undefined("'" + name + "' is undefined");
}

CallArgs Interpreter::eval_args(const Expr& e, size_t first, const FramePtr& frame) {
  CallArgs args;
  for (size_t i = first; i < e.items.size(); ++i) args.positional.push_back(eval(*e.items[i], frame));
  for (const auto& [key, value] : e.kwargs) args.keyword.emplace_back(key, eval(*value, frame));
  return args;
}

Value Interpreter::eval_filter(const Expr& e, const FramePtr& frame, const Value* block_text) {
  Value input = e.items[0] ? (e.items[0]->kind == Expr::Kind::kFilter ? eval_filter(*e.items[0], frame, block_text)
                                                                       : eval(*e.items[0], frame))
                          : *block_text;
  CallArgs args = eval_args(e, 1, frame);
  return apply_filter(e.name, input, args);
}

Value Interpreter::eval_slice(const Expr& e, const FramePtr& frame) {
  const Value obj = eval(*e.items[0], frame);
  require_defined(obj);
  std::optional<int64_t> bounds[3];
  for (int k = 0; k < 3; ++k) {
    if (!e.items[k + 1]) continue;
    const Value b = eval(*e.items[k + 1], frame);
    if (b.is_none()) continue;
    if (!b.is_int() && !b.is_bool()) error("slice indices must be integers or None");
    bounds[k] = b.as_int();
  }
  if (bounds[2] && *bounds[2] == 0) error("slice step cannot be zero");
  if (obj.is_string()) {
    const std::u32string u = py::decode_utf8(obj.as_string());
    std::u32string out;
    for (int64_t i : py::slice_indexes(static_cast<int64_t>(u.size()), bounds[0], bounds[1], bounds[2])) {
      out.push_back(u[static_cast<size_t>(i)]);
    }
    return Value::String(py::encode_utf8(out));
  }
  if (!obj.is_sequence()) error("'" + obj.type_name() + "' object is not subscriptable");
  const ValueList& items = obj.as_list();
  ValueList out;
  for (int64_t i : py::slice_indexes(static_cast<int64_t>(items.size()), bounds[0], bounds[1], bounds[2])) {
    out.push_back(items[static_cast<size_t>(i)]);
  }
  return obj.kind() == Value::Kind::kTuple ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
}

Value Interpreter::eval(const Expr& e, const FramePtr& frame) {
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.literal;
    case Expr::Kind::kName:
      return lookup(e.name, *frame);
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      ValueList items;
      for (const auto& item : e.items) items.push_back(eval(*item, frame));
      return e.kind == Expr::Kind::kList ? Value::List(std::move(items)) : Value::Tuple(std::move(items));
    }
    case Expr::Kind::kDict: {
      ValueDict d;
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
        Value key = eval(*e.items[i], frame);
        if (key.is_sequence() && key.kind() != Value::Kind::kTuple) error("unhashable type: '" + key.type_name() + "'");
        if (key.is_dict() || key.is_undefined()) error("unhashable type: '" + key.type_name() + "'");
        d.set(std::move(key), eval(*e.items[i + 1], frame));
      }
      return Value::Dict(std::move(d));
    }
    case Expr::Kind::kGetAttr:
      return get_attribute(eval(*e.items[0], frame), e.name);
    case Expr::Kind::kGetItem:
      return get_item(eval(*e.items[0], frame), eval(*e.items[1], frame));
    case Expr::Kind::kSlice:
      return eval_slice(e, frame);
    case Expr::Kind::kCall: {
      const Value callee = eval(*e.items[0], frame);
      require_defined(callee);
      if (!callee.is_callable()) error("'" + callee.type_name() + "' object is not callable");
      CallArgs args = eval_args(e, 1, frame);
      return callee.call(args);
    }
    case Expr::Kind::kFilter:
      return eval_filter(e, frame, nullptr);
    case Expr::Kind::kTest: {
      const Value subject = eval(*e.items[0], frame);
      CallArgs args = eval_args(e, 1, frame);
      return Value::Bool(apply_test(e.name, subject, args) != e.negated);
    }
    case Expr::Kind::kNeg:
    case Expr::Kind::kPos: {
      const Value v = eval(*e.items[0], frame);
      require_defined(v);
      if (!v.is_number()) error("bad operand type for unary " + std::string(e.kind == Expr::Kind::kNeg ? "-" : "+") +
                                ": '" + v.type_name() + "'");
      if (e.kind == Expr::Kind::kPos) return v.is_bool() ? Value::Int(v.as_int()) : v;
      return v.is_float() ? Value::Float(-v.as_double()) : Value::Int(-v.as_int());
    }
    case Expr::Kind::kNot:
      return Value::Bool(!eval(*e.items[0], frame).truthy());
    case Expr::Kind::kAnd: {
      Value a = eval(*e.items[0], frame);
      return a.truthy() ? eval(*e.items[1], frame) : a;
    }
    case Expr::Kind::kOr: {
      Value a = eval(*e.items[0], frame);
      return a.truthy() ? a : eval(*e.items[1], frame);
    }
    case Expr::Kind::kBinary: {
      const Value a = eval(*e.items[0], frame);
      const Value b = eval(*e.items[1], frame);
      return eval_binary(e.name, a, b);
    }
    case Expr::Kind::kCompare: {
      Value left = eval(*e.items[0], frame);
      for (size_t i = 0; i < e.ops.size(); ++i) {
        Value right = eval(*e.items[i + 1], frame);
        if (!eval_compare(e.ops[i], left, right)) return Value::Bool(false);
        left = std::move(right);
      }
      return Value::Bool(true);
    }
    case Expr::Kind::kCondition:
      if (eval(*e.items[0], frame).truthy()) return eval(*e.items[1], frame);
      return e.items[2] ? eval(*e.items[2], frame) : Value::Undefined("the inline if-expression had no else");
  }
  return Value();
}

bool Interpreter::eval_compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return a.equals(b);
  if (op == "!=") return !a.equals(b);
  if (op == "in" || op == "notin") {
    bool found = false;
    if (b.is_string()) {
      require_defined(a);
      if (!a.is_string()) error("'in <string>' requires string as left operand, not " + a.type_name());
      found = b.as_string().find(a.as_string()) != std::string::npos;
    } else if (b.is_dict() || b.is_namespace()) {
      found = b.as_dict().find(a) != nullptr;
    } else if (b.is_sequence() || b.is_generator()) {
      for (const Value& item : b.as_list()) found = found || item.equals(a);
    } else if (!b.is_undefined()) {
      error("argument of type '" + b.type_name() + "' is not iterable");
    }
    return op == "in" ? found : !found;
  }
  const int c = compare_values(a, b);
  if (op == "<") return c < 0;
  if (op == "<=") return c <= 0;
  if (op == ">") return c > 0;
  return c >= 0;
}

Value Interpreter::eval_binary(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") return Value::String(a.str() + b.str());
  require_defined(a);
  require_defined(b);
  const bool ints = (a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool());
  const bool nums = a.is_number() && b.is_number();
  int64_t r = 0;
  if (op == "+") {
    if (ints) return Value::Int(checked(__builtin_add_overflow(a.as_int(), b.as_int(), &r), r));
    if (nums) return Value::Float(a.as_double() + b.as_double());
    if (a.is_markup() || b.is_markup()) {
      if (a.is_string() && b.is_string()) {
        auto escaped = [](const Value& v) { return v.is_markup() ? v.as_string() : py::html_escape(v.as_string()); };
        return Value::Markup(escaped(a) + escaped(b));
      }
      unsupported_operands(op, a, b);
    }
    if (a.is_string() && b.is_string()) return Value::String(a.as_string() + b.as_string());
    if (a.is_sequence() && a.kind() == b.kind()) {
      ValueList items = a.as_list();
      items.insert(items.end(), b.as_list().begin(), b.as_list().end());
      return a.kind() == Value::Kind::kTuple ? Value::Tuple(std::move(items)) : Value::List(std::move(items));
    }
    if (a.is_string()) error("can only concatenate str (not \"" + b.type_name() + "\") to str");
    unsupported_operands(op, a, b);
  }
  if (op == "-") {
    if (ints) return Value::Int(checked(__builtin_sub_overflow(a.as_int(), b.as_int(), &r), r));
    if (nums) return Value::Float(a.as_double() - b.as_double());
    unsupported_operands(op, a, b);
  }
  if (op == "*") {
    if (ints) return Value::Int(checked(__builtin_mul_overflow(a.as_int(), b.as_int(), &r), r));
    if (nums) return Value::Float(a.as_double() * b.as_double());
    const Value& seq = (a.is_string() || a.is_sequence()) ? a : b;
    const Value& count = (a.is_string() || a.is_sequence()) ? b : a;
    if ((seq.is_string() || seq.is_sequence()) && (count.is_int() || count.is_bool())) {
      const int64_t times = count.as_int();
      if (times > 0 && (seq.is_string() ? seq.as_string().size() : seq.as_list().size()) * times > (1u << 26)) {
        error("repetition result too large");
      }
      if (seq.is_string()) {
        std::string out;
        for (int64_t i = 0; i < times; ++i) out += seq.as_string();
        return Value::String(std::move(out));
      }
      ValueList items;
      for (int64_t i = 0; i < times; ++i) items.insert(items.end(), seq.as_list().begin(), seq.as_list().end());
      return seq.kind() == Value::Kind::kTuple ? Value::Tuple(std::move(items)) : Value::List(std::move(items));
    }
    unsupported_operands(op, a, b);
  }
  if (!nums) unsupported_operands(op, a, b);
  if (op == "/") {
    if (b.as_double() == 0.0) error("division by zero");
    return Value::Float(a.as_double() / b.as_double());
  }
  if (op == "//" || op == "%") {
    if (b.as_double() == 0.0) error(op == "//" ? "integer division or modulo by zero" : "modulo by zero");
    if (ints) {
      const int64_t x = a.as_int(), y = b.as_int();
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;
      return Value::Int(op == "//" ? q : m);
    }
    const double x = a.as_double(), y = b.as_double();
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return Value::Float(op == "//" ? std::floor(x / y) : m);
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t result = 1, base = a.as_int();
      for (int64_t e = b.as_int(); e > 0; e >>= 1) {
        if (e & 1) result = checked(__builtin_mul_overflow(result, base, &r), r);
        if (e > 1) base = checked(__builtin_mul_overflow(base, base, &r), r);
      }
      return Value::Int(result);
    }
    return Value::Float(std::pow(a.as_double(), b.as_double()));
  }
  unsupported_operands(op, a, b);
}

}  // namespace deepinfer::chat::jinja
