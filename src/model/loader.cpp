#include "model/loader.h"

#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "model/deepseek/model.h"
#include "model/deepseek_v4/model.h"

namespace deepinfer {

namespace {

// architectures[0] of DIR/config.json, or "" when absent (the model's own parser reports it).
Result<std::string> config_architecture(const std::string& model_dir) {
  const std::string path = (std::filesystem::path(model_dir) / "config.json").string();
  DI_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Error(path + ": not valid JSON");
  if (!j.is_object()) return std::string();
  auto arch = j.find("architectures");
  if (arch == j.end() || !arch->is_array() || arch->empty() || !(*arch)[0].is_string()) return std::string();
  return (*arch)[0].get<std::string>();
}

}  // namespace

Result<std::unique_ptr<CausalLM>> load_causal_lm(const std::string& model_dir, const ModelOptions& options,
                                                 Backend& backend) {
  DI_ASSIGN_OR_RETURN(const std::string architecture, config_architecture(model_dir));
  if (architecture == "DeepseekV4ForCausalLM") {
    DI_ASSIGN_OR_RETURN(auto model, DeepseekV4Model::Load(model_dir, options, backend));
    return std::unique_ptr<CausalLM>(std::move(model));
  }
  DI_ASSIGN_OR_RETURN(auto model, DeepseekModel::Load(model_dir, options, backend));
  return std::unique_ptr<CausalLM>(std::move(model));
}

std::string describe_causal_lm(const CausalLM& model) {
  const CausalLMInfo& i = model.info();
  char buf[1024];
  auto kv_bytes = [&](DType t) {
    return MlaCacheLayout{t, i.kv_lora_rank, i.qk_rope_head_dim}.bytes_per_token() * size_t(i.n_layers);
  };
  std::snprintf(buf, sizeof buf,
                "%s: %.3fB parameters, %.2f GiB of weights, %d layers, vocab %d, context %d; "
                "KV cache bytes per token: %zu (bf16), %zu (fp8), %zu (f32)%s%s%s",
                i.architecture.c_str(), double(i.n_params) / 1e9, double(i.n_weight_bytes) / (1u << 30), i.n_layers,
                i.vocab_size, i.max_position_embeddings, kv_bytes(DType::BF16), kv_bytes(DType::F8_E4M3),
                kv_bytes(DType::F32), i.activation_dtype == DType::BF16 ? "; bf16 activations" : "",
                i.kv_note.empty() ? "" : "; ", i.kv_note.c_str());
  return buf;
}

}  // namespace deepinfer
