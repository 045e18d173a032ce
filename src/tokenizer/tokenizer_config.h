// TokenizerConfig: what a checkpoint's tokenizer_config.json and generation_config.json say about
// special tokens and generation, as Hugging Face transformers reads them.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace deepinfer {

struct TokenizerConfig {
  // Special token contents; a field may be a string or an AddedToken object {"content": ...};
  // null or absent gives nullopt.
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;
  std::optional<bool> add_bos_token, add_eos_token;  // absent: nullopt
  // chat_template as given: a string, a list of {"name", "template"} objects, or null if absent.
  nlohmann::json chat_template;
  // model_max_length when it is a usable integer (transformers writes ~1e30 for "no limit").
  std::optional<uint64_t> model_max_length;
  // generation_config.json's eos_token_id (one id or a list); empty when absent.
  std::vector<int32_t> generation_eos_token_ids;
  std::optional<int32_t> generation_bos_token_id;

  // Parses the two files' contents; an empty string stands for a missing file.
  static Result<TokenizerConfig> FromJson(std::string_view tokenizer_config_json,
                                          std::string_view generation_config_json);
};

}  // namespace deepinfer
