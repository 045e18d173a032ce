// Renders a parsed template (jinja_ast.h) with Jinja2's runtime semantics: each for-loop
// iteration, macro call and block has its own scope (assignments there do not leak out, which is
// why templates use namespace()), names resolve outward to the template's variables and then
// to the global functions, Undefined prints as "" and fails when used as a value.
// One Interpreter renders once, on one thread; the tree it reads may be shared.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "chat/jinja_ast.h"

namespace deepinfer::chat::jinja {

// A scope: its own names, then its parent's.
struct Frame {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Frame> parent;
};

class Interpreter {
 public:
  // Appends the rendering of `body` with the variables of `root` to `out`. Throws RenderError.
  void render(const Body& body, const std::shared_ptr<Frame>& root, std::string& out);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using FramePtr = std::shared_ptr<Frame>;

  Flow exec(const Body& body, const FramePtr& frame, std::string& out);
  Flow exec_node(const Node& node, const FramePtr& frame, std::string& out);
  void exec_for(const Node& node, const FramePtr& frame, std::string& out);
  void exec_set(const Node& node, const FramePtr& frame);
  std::string render_scoped(const Body& body, const FramePtr& frame);

  Value eval(const Expr& e, const FramePtr& frame);
  Value eval_filter(const Expr& e, const FramePtr& frame, const Value* block_text);
  Value eval_binary(const std::string& op, const Value& a, const Value& b);
  bool eval_compare(const std::string& op, const Value& a, const Value& b);
  Value eval_slice(const Expr& e, const FramePtr& frame);
  CallArgs eval_args(const Expr& e, size_t first, const FramePtr& frame);
  Value lookup(const std::string& name, const Frame& frame) const;
  Value make_macro(const std::string& name, const std::vector<MacroParam>& params, const Body& body,
                   const FramePtr& frame);

  int call_depth_ = 0;
};

}  // namespace deepinfer::chat::jinja
