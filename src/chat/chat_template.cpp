#include "chat/chat_template.h"

#include <algorithm>
#include <filesystem>

#include "core/mapped_file.h"

namespace deepinfer::chat {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

// The special-token attributes transformers passes to templates (SPECIAL_TOKENS_ATTRIBUTES).
constexpr const char* kSpecialTokenNames[] = {"bos_token", "eos_token", "unk_token",  "sep_token",
                                              "pad_token", "cls_token", "mask_token", "additional_special_tokens"};

// A token as tokenizer_config.json writes it: a string, or an AddedToken object with "content".
std::string token_text(const ojson& t) {
  if (t.is_string()) return t.get<std::string>();
  if (t.is_object() && t.contains("content") && t["content"].is_string()) return t["content"].get<std::string>();
  return "";
}

Result<ojson> read_json(const fs::path& path) {
  DI_ASSIGN_OR_RETURN(std::string text, read_text_file(path.string()));
  ojson j = ojson::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Error(path.string() + ": not valid JSON");
  return j;
}

}  // namespace

Result<ChatTemplate> ChatTemplate::Load(const std::string& model_dir) {
  const fs::path dir(model_dir);
  ojson config = ojson::object();
  std::error_code ec;
  if (fs::exists(dir / "tokenizer_config.json", ec)) {
    DI_ASSIGN_OR_RETURN(config, read_json(dir / "tokenizer_config.json"));
    if (!config.is_object()) return Status::Error((dir / "tokenizer_config.json").string() + ": not a JSON object");
  }
  // Template files replace the config's templates, as in transformers.
  ojson files = ojson::array();
  if (fs::exists(dir / "chat_template.jinja", ec)) {
    DI_ASSIGN_OR_RETURN(std::string text, read_text_file((dir / "chat_template.jinja").string()));
    files.push_back({{"name", "default"}, {"template", text}});
  }
  const fs::path extra_dir = dir / "additional_chat_templates";
  if (fs::is_directory(extra_dir, ec)) {
    std::vector<fs::path> paths;
    for (const auto& entry : fs::directory_iterator(extra_dir, ec)) {
      if (entry.path().extension() == ".jinja") paths.push_back(entry.path());
    }
    std::sort(paths.begin(), paths.end());
    for (const fs::path& p : paths) {
      DI_ASSIGN_OR_RETURN(std::string text, read_text_file(p.string()));
      files.push_back({{"name", p.stem().string()}, {"template", text}});
    }
  }
  if (!files.empty()) config["chat_template"] = files;
  if (fs::exists(dir / "special_tokens_map.json", ec)) {
    DI_ASSIGN_OR_RETURN(ojson map, read_json(dir / "special_tokens_map.json"));
    if (map.is_object()) {
      for (const auto& [key, value] : map.items()) config[key] = value;
    }
  }
  if (!config.contains("chat_template") || config["chat_template"].is_null()) {
    return Status::Error(model_dir + ": no chat template (no chat_template in tokenizer_config.json, no " +
                         "chat_template.jinja)");
  }
  Result<ChatTemplate> loaded = FromConfig(config);
  if (!loaded.ok()) return Status::Error(model_dir + ": " + loaded.status().message());
  return loaded;
}

Result<ChatTemplate> ChatTemplate::FromConfig(const ojson& config) {
  ChatTemplate ct;
  const ojson& source = config.contains("chat_template") ? config["chat_template"] : ojson();
  std::vector<std::pair<std::string, std::string>> sources;
  if (source.is_string()) {
    sources.emplace_back("default", source.get<std::string>());
  } else if (source.is_array()) {
    for (const ojson& entry : source) {
      if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
          !entry.contains("template") || !entry["template"].is_string()) {
        return Status::Error("chat_template list entries must be {\"name\": str, \"template\": str}");
      }
      sources.emplace_back(entry["name"].get<std::string>(), entry["template"].get<std::string>());
    }
  } else {
    return Status::Error("chat_template must be a string or a list of named templates");
  }
  for (auto& [name, text] : sources) {
    Result<jinja::Template> parsed = jinja::Template::Parse(text);
    if (!parsed.ok()) return Status::Error("chat template '" + name + "': " + parsed.status().message());
    ct.templates_.emplace_back(name, std::move(parsed).value());
  }
  for (const char* name : kSpecialTokenNames) {
    if (!config.contains(name)) continue;
    const ojson& t = config[name];
    if (t.is_array()) {
      jinja::ValueList tokens;
      for (const ojson& e : t) tokens.push_back(jinja::Value::String(token_text(e)));
      if (!tokens.empty()) ct.special_tokens_.set(name, jinja::Value::List(std::move(tokens)));
    } else if (std::string text = token_text(t); !text.empty()) {
      ct.special_tokens_.set(name, jinja::Value::String(std::move(text)));
    }
  }
  return ct;
}

Result<std::string> ChatTemplate::render(const ojson& messages, const ojson& tools, bool add_generation_prompt,
                                         const ojson& extra_kwargs) const {
  if (!messages.is_array()) return Status::Error("messages must be an array");
  if (!tools.is_null() && !tools.is_array()) return Status::Error("tools must be an array or null");
  if (!extra_kwargs.is_null() && !extra_kwargs.is_object()) {
    return Status::Error("chat template keyword arguments must be an object");
  }
  auto find = [&](std::string_view name) -> const jinja::Template* {
    for (const auto& [n, t] : templates_) {
      if (n == name) return &t;
    }
    return nullptr;
  };
  const jinja::Template* tmpl = nullptr;
  if (!tools.is_null()) tmpl = find("tool_use");
  if (!tmpl) tmpl = find("default");
  if (!tmpl) return Status::Error("the model has several chat templates and none is named 'default'");

  jinja::ValueDict vars = special_tokens_;
  if (extra_kwargs.is_object()) {
    for (const auto& [key, value] : extra_kwargs.items()) {
      if (key == "messages" || key == "tools" || key == "documents" || key == "add_generation_prompt") {
        return Status::Error("chat template keyword argument '" + key + "' is set by the request itself");
      }
      vars.set(key, jinja::Value::FromJson(value));
    }
  }
  vars.set("messages", jinja::Value::FromJson(messages));
  vars.set("tools", jinja::Value::FromJson(tools));
  vars.set("documents", jinja::Value::None());
  vars.set("add_generation_prompt", jinja::Value::Bool(add_generation_prompt));
  return tmpl->render(vars);
}

std::vector<std::string> ChatTemplate::template_names() const {
  std::vector<std::string> names;
  for (const auto& [name, t] : templates_) names.push_back(name);
  return names;
}

}  // namespace deepinfer::chat
