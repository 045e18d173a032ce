// jinja::Template: a Jinja2 template parsed once and rendered many times, with the environment
// transformers uses for chat templates (see jinja_lexer.h, jinja_builtins.h). Parse fails on
// syntax errors and on constructs this engine does not implement, naming them; render fails
// on what Jinja2 would raise at run time (raise_exception, undefined values used, type errors).
// Thread-safe: a Template is immutable, and concurrent renders share nothing mutable.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "chat/jinja_ast.h"
#include "core/status.h"

namespace deepinfer::chat::jinja {

class Template {
 public:
  static Result<Template> Parse(std::string_view source);

  // Renders with `variables` as the template's global names.
  Result<std::string> render(const ValueDict& variables) const;

 private:
  std::shared_ptr<const Body> body_;
};

}  // namespace deepinfer::chat::jinja
