#include "chat/prompt_format.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace deepinfer::chat {

PromptFormat prompt_format_for_architecture(const std::string& architecture) {
  if (architecture == "DeepseekV4ForCausalLM" || architecture == "DeepseekV41ForCausalLM") return PromptFormat::kDeepseekV4;
  return PromptFormat::kChatTemplate;
}

Result<PromptFormat> detect_prompt_format(const std::string& model_dir) {
  const std::filesystem::path path = std::filesystem::path(model_dir) / "config.json";
  std::ifstream in(path);
  if (!in) return PromptFormat::kChatTemplate;
  std::stringstream text;
  text << in.rdbuf();
  const auto config = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return Status::Error(path.string() + ": not valid JSON");
  if (!config.is_object() || !config.contains("architectures") || !config["architectures"].is_array()) {
    return PromptFormat::kChatTemplate;
  }
  for (const auto& arch : config["architectures"]) {
    if (arch.is_string() && prompt_format_for_architecture(arch) == PromptFormat::kDeepseekV4) {
      return PromptFormat::kDeepseekV4;
    }
  }
  return PromptFormat::kChatTemplate;
}

}  // namespace deepinfer::chat
