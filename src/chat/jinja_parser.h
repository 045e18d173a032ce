// Jinja parser: tokens to a syntax tree, with Jinja2's grammar and operator precedence, then a
// check that every filter, test, method and function the template names is one this engine
// implements (jinja_builtins.h), so an unsupported template fails here, at load, naming the
// construct, rather than in the middle of a request.
#pragma once

#include <string_view>

#include "chat/jinja_ast.h"

namespace deepinfer::chat::jinja {

// Throws TemplateSyntaxError (jinja_error.h) with the line and the construct at fault.
Body parse_template(std::string_view source);

}  // namespace deepinfer::chat::jinja
