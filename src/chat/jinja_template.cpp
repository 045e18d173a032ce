#include "chat/jinja_template.h"

#include "chat/jinja_error.h"
#include "chat/jinja_interpreter.h"
#include "chat/jinja_parser.h"

namespace deepinfer::chat::jinja {

Result<Template> Template::Parse(std::string_view source) {
  try {
    Template t;
    t.body_ = std::make_shared<const Body>(parse_template(source));
    return t;
  } catch (const TemplateSyntaxError& e) {
    return Status::Error(std::string("chat template syntax: ") + e.what());
  } catch (const std::exception& e) {
    return Status::Error(std::string("chat template syntax: ") + e.what());
  }
}

Result<std::string> Template::render(const ValueDict& variables) const {
  auto root = std::make_shared<Frame>();
  for (const auto& [name, value] : variables.items()) root->vars[name.str()] = value;
  std::string out;
  try {
    Interpreter().render(*body_, root, out);
  } catch (const std::exception& e) {  // RenderError, or a library failure such as bad_alloc
    return Status::Error(std::string("chat template error: ") + e.what());
  }
  return out;
}

}  // namespace deepinfer::chat::jinja
