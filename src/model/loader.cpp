#include "model/loader.h"

#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "model/deepseek/model.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v41/model.h"

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
  if (architecture == "DeepseekV41ForCausalLM") {
    DI_ASSIGN_OR_RETURN(auto model, DeepseekV41Model::Load(model_dir, options, backend));
    std::fprintf(stderr, "deepinfer: %s\n", model->load_note().c_str());
    return std::unique_ptr<CausalLM>(std::move(model));
  }
  DI_ASSIGN_OR_RETURN(auto model, DeepseekModel::Load(model_dir, options, backend));
  return std::unique_ptr<CausalLM>(std::move(model));
}

std::string describe_causal_lm(const CausalLM& model, int block_size) {
  const CausalLMInfo& i = model.info();
  char buf[512];
  std::snprintf(buf, sizeof buf, "%s: %.3fB parameters, %.2f GiB of weights, %d layers, vocab %d, context %d%s%s",
                i.architecture.c_str(), double(i.n_params) / 1e9, double(i.n_weight_bytes) / (1u << 30), i.n_layers,
                i.vocab_size, i.max_position_embeddings, i.activation_dtype == DType::BF16 ? ", bf16 activations" : "",
                !i.lm_head_requantized                    ? ""
                : *i.lm_head_requantized == DType::I8_SM ? ", lm_head requantized to int8"
                                                          : ", lm_head requantized to fp8");
  std::string s = buf;
  if (i.n_relaid_bytes > 0) {
    const double mib = double(i.n_relaid_bytes) / (1u << 20);
    if (mib < 1024) std::snprintf(buf, sizeof buf, ", %.1f MiB relaid into the kernels' layout", mib);
    else std::snprintf(buf, sizeof buf, ", %.2f GiB relaid into the kernels' layout", mib / 1024);
    s += buf;
  }
  std::string per_dtype;
  for (const DType t : {DType::BF16, DType::F8_E4M3, DType::F32}) {
    auto kinds = model.kv_kinds(t, block_size);
    if (!kinds.ok()) continue;
    const size_t window = kv_bytes_per_sequence_window(*kinds, block_size);
    std::snprintf(buf, sizeof buf, "%s%.1f (%s)", per_dtype.empty() ? "" : ", ", kv_bytes_per_token(*kinds, block_size),
                  t == DType::BF16 ? "bf16" : t == DType::F32 ? "f32" : "fp8");
    per_dtype += buf;
    if (window > 0) per_dtype += " + " + std::to_string(window) + " per sequence";
  }
  if (!per_dtype.empty()) s += "; KV cache bytes per token at " + std::to_string(block_size) + "-token blocks: " + per_dtype;
  return s;
}

}  // namespace deepinfer
