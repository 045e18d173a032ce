// Errors inside the Jinja engine. They are thrown only between the engine's own files and caught
// at its boundary (jinja_template.cpp), which turns them into a Status; no exception leaves
// the chat module.
#pragma once

#include <stdexcept>
#include <string>

namespace deepinfer::chat::jinja {

// A template that cannot be parsed or uses a construct this engine does not support.
struct TemplateSyntaxError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A failure while rendering: raise_exception(), an undefined value used, a type error.
struct RenderError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace deepinfer::chat::jinja
