#include "tokenizer/tokenizer_config.h"

namespace deepinfer {
namespace {

using json = nlohmann::json;

Result<std::optional<std::string>> token_field(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::optional<std::string>();
  if (it->is_string()) return std::optional<std::string>(it->get<std::string>());
  if (it->is_object()) {
    auto content = it->find("content");
    if (content != it->end() && content->is_string()) {
      return std::optional<std::string>(content->get<std::string>());
    }
  }
  return Status::Error(std::string("tokenizer_config.json: ") + key +
                       " must be a string, an AddedToken object or null");
}

Result<std::optional<bool>> bool_field(const json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::optional<bool>();
  if (!it->is_boolean()) return Status::Error(std::string("tokenizer_config.json: ") + key + " must be a boolean");
  return std::optional<bool>(it->get<bool>());
}

Result<int32_t> token_id(const json& value, const char* what) {
  if (!value.is_number_unsigned() || value.get<uint64_t>() > uint64_t(INT32_MAX)) {
    return Status::Error(std::string("generation_config.json: ") + what + " must hold token ids");
  }
  return static_cast<int32_t>(value.get<uint64_t>());
}

}  // namespace

Result<TokenizerConfig> TokenizerConfig::FromJson(std::string_view tokenizer_config_json,
                                                  std::string_view generation_config_json) {
  TokenizerConfig c;
  if (!tokenizer_config_json.empty()) {
    const json config = json::parse(tokenizer_config_json, nullptr, false);
    if (config.is_discarded() || !config.is_object()) {
      return Status::Error("tokenizer_config.json is not a JSON object");
    }
    DI_ASSIGN_OR_RETURN(c.bos_token, token_field(config, "bos_token"));
    DI_ASSIGN_OR_RETURN(c.eos_token, token_field(config, "eos_token"));
    DI_ASSIGN_OR_RETURN(c.pad_token, token_field(config, "pad_token"));
    DI_ASSIGN_OR_RETURN(c.unk_token, token_field(config, "unk_token"));
    DI_ASSIGN_OR_RETURN(c.add_bos_token, bool_field(config, "add_bos_token"));
    DI_ASSIGN_OR_RETURN(c.add_eos_token, bool_field(config, "add_eos_token"));
    if (auto it = config.find("chat_template"); it != config.end()) c.chat_template = *it;
    if (auto it = config.find("model_max_length"); it != config.end() && it->is_number_unsigned()) {
      c.model_max_length = it->get<uint64_t>();
    }
  }
  if (!generation_config_json.empty()) {
    const json config = json::parse(generation_config_json, nullptr, false);
    if (config.is_discarded() || !config.is_object()) {
      return Status::Error("generation_config.json is not a JSON object");
    }
    if (auto it = config.find("eos_token_id"); it != config.end() && !it->is_null()) {
      if (it->is_array()) {
        for (const json& id : *it) {
          DI_ASSIGN_OR_RETURN(int32_t value, token_id(id, "eos_token_id"));
          c.generation_eos_token_ids.push_back(value);
        }
      } else {
        DI_ASSIGN_OR_RETURN(int32_t value, token_id(*it, "eos_token_id"));
        c.generation_eos_token_ids.push_back(value);
      }
    }
    if (auto it = config.find("bos_token_id"); it != config.end() && !it->is_null()) {
      DI_ASSIGN_OR_RETURN(c.generation_bos_token_id, token_id(*it, "bos_token_id"));
    }
  }
  return c;
}

}  // namespace deepinfer
