#include "model/config_json.h"

#include <filesystem>

#include "core/mapped_file.h"
#include "model/json_fields.h"

namespace deepinfer {

using nlohmann::json;

std::string config_json_path(const std::string& model_dir) {
  return (std::filesystem::path(model_dir) / "config.json").string();
}

Result<json> read_config_json(const std::string& path) {
  DI_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Error(path + ": not valid JSON");
  return j;
}

Result<std::string> architecture_name(const json& j, const std::string& source) {
  auto arch = j.find("architectures");
  if (arch == j.end() || !arch->is_array() || arch->empty() || !(*arch)[0].is_string())
    return Status::Error(source + ": field 'architectures' must be a non-empty list of names");
  return (*arch)[0].get<std::string>();
}

Status check_architecture(const json& j, const std::string& source, const std::string& architecture) {
  DI_ASSIGN_OR_RETURN(std::string name, architecture_name(j, source));
  if (name != architecture)
    return Status::Error(source + ": architecture '" + name + "' is not " + architecture);
  return Status::Ok();
}

Status check_known_keys(const json& j, const std::set<std::string>& known, const std::string& source,
                        const std::string& model) {
  for (const auto& [key, value] : j.items())
    if (!known.count(key)) return Status::Error(source + ": field '" + key + "' is not known for " + model);
  return Status::Ok();
}

Status read_generation_config(const std::string& model_dir, std::vector<int32_t>& eos_token_ids,
                              int32_t& bos_token_id) {
  const std::string path = (std::filesystem::path(model_dir) / "generation_config.json").string();
  if (!std::filesystem::exists(path)) return Status::Ok();
  DI_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  json g = json::parse(text, nullptr, false);
  if (g.is_discarded() || !g.is_object()) return Status::Error(path + ": not a valid JSON object");
  FieldReader f(g, path);
  f.ids("eos_token_id", eos_token_ids);
  f.integer("bos_token_id", bos_token_id, false);
  return f.status();
}

}  // namespace deepinfer
