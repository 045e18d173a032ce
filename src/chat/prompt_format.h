// Which prompt renderer a checkpoint gets. DeepSeek-V4 and V4.1 checkpoints (config.json
// architectures DeepseekV4ForCausalLM, DeepseekV41ForCausalLM) ship DeepSeek's own encoder and no
// chat template: they get encode_deepseek_v4 (deepseek_v4_encoder.h). Every other checkpoint gets
// its Jinja chat template (chat_template.h), as transformers renders it.
#pragma once

#include <string>

#include "core/status.h"

namespace deepinfer::chat {

enum class PromptFormat {
  kChatTemplate,  // tokenizer_config.json's chat template
  kDeepseekV4,    // DeepSeek's V4 encoder
};

// The format of a model with this config.json architecture ("DeepseekV4ForCausalLM", ...).
PromptFormat prompt_format_for_architecture(const std::string& architecture);

// From model_dir/config.json's "architectures"; a folder without config.json (a tokenizer alone)
// gets the chat template. Fails on a config.json that is not JSON.
Result<PromptFormat> detect_prompt_format(const std::string& model_dir);

}  // namespace deepinfer::chat
