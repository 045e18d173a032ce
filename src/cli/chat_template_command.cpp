// `deepinfer chat-template --model DIR`: renders conversations as the checkpoint's prompt format
// says (chat/prompt_format.h), and tokenizes the result.
// With a chat template, as transformers' apply_chat_template renders it:
//   in:  {"messages": [...], "add_generation_prompt": true|false, "tools": [...],
//         "chat_template_kwargs": {...}}   (all but messages optional)
// For DeepSeek-V4 / V4.1 checkpoints, as DeepSeek's encode_messages renders it:
//   in:  {"messages": [...], "thinking_mode": "chat"|"thinking", "options": {...}, "tools": [...]}
//        (options as encode_messages' keyword arguments: drop_thinking, reasoning_effort,
//        add_default_bos_token, context; add_generation_prompt does not apply: the encoder
//        decides; all but messages optional, thinking_mode defaults to "chat")
//   out: {"rendered": "...", "ids": [...]}
// The ids are the rendered text encoded without added special tokens (the rendering writes its
// own BOS), as apply_chat_template(tokenize=True) does. A line that cannot be rendered gets
// {"error": "..."} and the rest continue; the exit code is 1 if any line failed (2 if the template
// or tokenizer cannot be loaded).
#include <nlohmann/json.hpp>

#include <iostream>
#include <string>

#include "chat/chat_template.h"
#include "chat/deepseek_v4_encoder.h"
#include "chat/prompt_format.h"
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

Result<ojson> render_v4_line(const Tokenizer& tokenizer, const std::string& line) {
  const ojson input = ojson::parse(line, nullptr, /*allow_exceptions=*/false);
  if (input.is_discarded()) return Status::Error("input line is not valid JSON");
  if (!input.is_object() || !input.contains("messages")) return Status::Error("expected {\"messages\": [...], ...}");
  std::string thinking_mode = "chat";
  if (input.contains("thinking_mode")) {
    if (!input["thinking_mode"].is_string()) return Status::Error("thinking_mode must be a string");
    thinking_mode = input["thinking_mode"];
  }
  const ojson options_json = input.contains("options") ? input["options"] : ojson::object();
  DI_ASSIGN_OR_RETURN(chat::DeepseekV4Options options, chat::DeepseekV4Options::FromJson(thinking_mode, options_json));
  const ojson tools = input.contains("tools") ? input["tools"] : ojson();
  DI_ASSIGN_OR_RETURN(std::string rendered, chat::encode_deepseek_v4(input["messages"], tools, options));
  DI_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer.encode(rendered, /*add_special_tokens=*/false));
  ojson out;
  out["rendered"] = std::move(rendered);
  out["ids"] = std::move(ids);
  return out;
}

int run_chat_template(const std::string& model_dir) {
  auto format = chat::detect_prompt_format(model_dir);
  if (!format.ok()) {
    std::cerr << "error: " << format.status().message() << '\n';
    return 2;
  }
  auto tokenizer = Tokenizer::Load(model_dir);
  if (!tokenizer.ok()) {
    std::cerr << "error: " << tokenizer.status().message() << '\n';
    return 2;
  }
  if (*format == chat::PromptFormat::kDeepseekV4) {
    return map_json_lines<ojson>([&](const std::string& line) { return render_v4_line(*tokenizer, line); });
  }
  auto tmpl = chat::ChatTemplate::Load(model_dir);
  if (!tmpl.ok()) {
    std::cerr << "error: " << tmpl.status().message() << '\n';
    return 2;
  }
  return map_json_lines<ojson>([&](const std::string& line) { return render_line(*tmpl, *tokenizer, line); });
}

void add_chat_template_command(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("chat-template", "Render conversations (JSON lines on stdin) with the chat template or DeepSeek-V4's encoder");
  auto model_dir = std::make_shared<std::string>();
  cmd->add_option("--model", *model_dir, "Checkpoint folder (tokenizer_config.json, tokenizer.json)")->required();
  cmd->callback([&run, model_dir] { run = [model_dir] { return run_chat_template(*model_dir); }; });
}

const bool kRegistered = register_command(&add_chat_template_command);

}  // namespace
}  // namespace deepinfer::cli
