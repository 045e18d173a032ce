// ChatTemplate: a checkpoint's chat template, rendered byte for byte as Hugging Face transformers'
// apply_chat_template renders it (sandboxed Jinja2, trim_blocks, lstrip_blocks; see
// jinja_template.h).
//
// Loading reads, as transformers does: tokenizer_config.json (`chat_template`: a string, or a list
// of {"name", "template"}; the special tokens), then chat_template.jinja and
// additional_chat_templates/<name>.jinja, which replace the config's templates when present, and
// special_tokens_map.json, whose entries override the config's. Every template is parsed at load,
// so an unsupported construct fails there, naming it.
//
// Rendering passes the template the variables transformers passes: `messages`, `tools` (None
// without tools), `documents` (None), `add_generation_prompt`, each special token that is set
// (bos_token, eos_token, unk_token, sep_token, pad_token, cls_token, mask_token,
// additional_special_tokens), and the extra keyword arguments (e.g. {"thinking": true}), which
// override special tokens. With tools, a template named "tool_use" is used if there is one,
// else "default".
//
// JSON objects must keep their key order (Python dicts do, and a tool's schema is printed in
// that order), hence nlohmann::ordered_json; a nlohmann::json converts to it implicitly, with
// its keys sorted.
//
// Thread-safe: render() is const and may run concurrently.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/jinja_template.h"
#include "core/status.h"

namespace deepinfer::chat {

class ChatTemplate {
 public:
  static Result<ChatTemplate> Load(const std::string& model_dir);
  // From the contents of a tokenizer_config.json (its `chat_template` and special tokens).
  static Result<ChatTemplate> FromConfig(const nlohmann::ordered_json& tokenizer_config);

  // messages: array of message objects; tools: array, or null for none; extra_kwargs: object
  // (or null). Fails on malformed arguments and on errors the template raises.
  Result<std::string> render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                             bool add_generation_prompt, const nlohmann::ordered_json& extra_kwargs) const;

  // Names of the loaded templates ("default", "tool_use", ...).
  std::vector<std::string> template_names() const;

 private:
  std::vector<std::pair<std::string, jinja::Template>> templates_;
  jinja::ValueDict special_tokens_;
};

}  // namespace deepinfer::chat
