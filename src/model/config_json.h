// What every model config reads the same way from a checkpoint folder: DIR/config.json as a JSON
// value, its architecture name, its keys against the ones a model knows, and the eos/bos ids of
// DIR/generation_config.json. Errors name the file and the field.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace deepinfer {

// DIR/config.json.
std::string config_json_path(const std::string& model_dir);

// The file at `path`, parsed.
Result<nlohmann::json> read_config_json(const std::string& path);

// The first name in j["architectures"].
Result<std::string> architecture_name(const nlohmann::json& j, const std::string& source);
// An error unless the first name in j["architectures"] is `architecture`.
Status check_architecture(const nlohmann::json& j, const std::string& source, const std::string& architecture);

// An error naming the first key of `j` not in `known` ("... is not known for `model`").
Status check_known_keys(const nlohmann::json& j, const std::set<std::string>& known, const std::string& source,
                        const std::string& model);

// eos_token_id and bos_token_id from DIR/generation_config.json, when the file is there, over
// those of config.json.
Status read_generation_config(const std::string& model_dir, std::vector<int32_t>& eos_token_ids,
                              int32_t& bos_token_id);

// DIR/config.json through C::FromJson, then eos/bos from DIR/generation_config.json.
template <class C>
Result<C> load_config(const std::string& model_dir) {
  const std::string path = config_json_path(model_dir);
  DI_ASSIGN_OR_RETURN(nlohmann::json j, read_config_json(path));
  DI_ASSIGN_OR_RETURN(C c, C::FromJson(j, path));
  DI_RETURN_IF_ERROR(read_generation_config(model_dir, c.eos_token_ids, c.bos_token_id));
  return c;
}

}  // namespace deepinfer
