// `deepinfer chat-template --model DIR`: renders conversations with the checkpoint's chat template
// as transformers' apply_chat_template does, and tokenizes the result.
//   in:  {"messages": [...], "add_generation_prompt": true|false, "tools": [...],
//         "chat_template_kwargs": {...}}   (all but messages optional)
//   out: {"rendered": "...", "ids": [...]}
// The ids are the rendered text encoded without added special tokens (the template writes its
// own BOS), as apply_chat_template(tokenize=True) does. A line that cannot be rendered gets
// {"error": "..."} and the rest continue; the exit code is 1 if any line failed (2 if the template
// or tokenizer cannot be loaded).
#include <nlohmann/json.hpp>

#include <iostream>
#include <string>

#include "chat/chat_template.h"
#include "cli/commands.h"
#include "cli/json_lines.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

using ojson = nlohmann::ordered_json;

Result<ojson> render_line(const chat::ChatTemplate& tmpl, const Tokenizer& tokenizer, const std::string& line) {
  const ojson input = ojson::parse(line, nullptr, /*allow_exceptions=*/false);
  if (input.is_discarded()) return Status::Error("input line is not valid JSON");
  if (!input.is_object() || !input.contains("messages")) return Status::Error("expected {\"messages\": [...], ...}");
  bool add_generation_prompt = false;
  if (input.contains("add_generation_prompt")) {
    if (!input["add_generation_prompt"].is_boolean()) return Status::Error("add_generation_prompt must be a boolean");
    add_generation_prompt = input["add_generation_prompt"].get<bool>();
  }
  const ojson tools = input.contains("tools") ? input["tools"] : ojson();
  const ojson kwargs = input.contains("chat_template_kwargs") ? input["chat_template_kwargs"] : ojson::object();
  DI_ASSIGN_OR_RETURN(std::string rendered, tmpl.render(input["messages"], tools, add_generation_prompt, kwargs));
  DI_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer.encode(rendered, /*add_special_tokens=*/false));
  ojson out;
  out["rendered"] = std::move(rendered);
  out["ids"] = std::move(ids);
  return out;
}

int run_chat_template(const std::string& model_dir) {
  auto tmpl = chat::ChatTemplate::Load(model_dir);
  if (!tmpl.ok()) {
    std::cerr << "error: " << tmpl.status().message() << '\n';
    return 2;
  }
  auto tokenizer = Tokenizer::Load(model_dir);
  if (!tokenizer.ok()) {
    std::cerr << "error: " << tokenizer.status().message() << '\n';
    return 2;
  }
  return map_json_lines<ojson>([&](const std::string& line) { return render_line(*tmpl, *tokenizer, line); });
}

void add_chat_template_command(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("chat-template", "Render conversations (JSON lines on stdin) with the chat template");
  auto model_dir = std::make_shared<std::string>();
  cmd->add_option("--model", *model_dir, "Checkpoint folder (tokenizer_config.json, tokenizer.json)")->required();
  cmd->callback([&run, model_dir] { run = [model_dir] { return run_chat_template(*model_dir); }; });
}

const bool kRegistered = register_command(&add_chat_template_command);

}  // namespace
}  // namespace deepinfer::cli
