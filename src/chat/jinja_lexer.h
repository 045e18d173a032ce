// Jinja lexer with the environment transformers uses for chat templates: trim_blocks and
// lstrip_blocks on, `-`/`+` whitespace control, comments dropped, {% raw %} kept verbatim, newlines
// normalized to "\n" and one trailing newline of the source removed (keep_trailing_newline off).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::chat::jinja {

struct Token {
  enum class Type { kData, kVariableBegin, kVariableEnd, kBlockBegin, kBlockEnd, kName, kString, kInteger, kFloat,
                    kOperator, kEnd };
  Type type;
  std::string value;  // data text, name, unescaped string, number text, operator
  int line;
};

// Throws TemplateSyntaxError (jinja_error.h) on an unterminated tag, comment or string.
std::vector<Token> tokenize(std::string_view source);

}  // namespace deepinfer::chat::jinja
