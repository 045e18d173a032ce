// ModelConfig: the fields of a Hugging Face config.json that change a DeepSeek-V2/V3 model's
// math, validated. Field names follow config.json (and DeepSeek's ModelArgs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"

namespace deepinfer {

enum class TopkMethod { kGreedy, kGroupLimitedGreedy, kNoauxTc };
enum class ScoringFunc { kSoftmax, kSigmoid };

// YaRN context extension (rope_scaling.type == "yarn"); factor 1 means plain RoPE.
struct RopeScaling {
  bool yarn = false;
  double factor = 1.0;
  int original_max_position_embeddings = 4096;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  double mscale = 1.0;
  double mscale_all_dim = 0.0;  // 0: absent
};

// quantization_config of FP8 checkpoints: e4m3 weights with one scale per block, an f32
// `*_scale_inv` (V2/V3) or a UE8M0 `.scale` (V4, V4.1, whose routed experts are FP4 e2m1 with
// UE8M0 scales per 32 inputs).
struct Fp8Quantization {
  bool enabled = false;
  int block_rows = 128;  // weight_block_size[0]: output rows per scale
  int block_cols = 128;  // weight_block_size[1]: input columns per scale
};

// Reads j["rope_scaling"] (absent or null: plain RoPE); errors name `source` and the field.
Status parse_rope_scaling(const nlohmann::json& j, const std::string& source, RopeScaling& r);
// Reads j["quantization_config"] (absent or null: not quantized): quant_method 'fp8', fmt 'e4m3',
// weight_block_size; with `ue8m0_scales` also scale_fmt 'ue8m0' and activation_scheme 'dynamic'.
// Errors name `source` and the field.
Status parse_fp8_quantization(const nlohmann::json& j, const std::string& source, bool ue8m0_scales,
                              Fp8Quantization& q);

struct ModelConfig {
  std::string architecture;  // DeepseekV3ForCausalLM or DeepseekV2ForCausalLM
  bool is_v3 = false;

  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;       // dense MLP
  int moe_intermediate_size = 0;   // each routed / shared expert
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_nextn_predict_layers = 0;  // MTP layers stored after the main ones; not run

  int q_lora_rank = 0;  // 0: no low-rank query (q_proj)
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;

  int n_routed_experts = 0;  // 0: every layer dense
  int n_shared_experts = 0;
  int num_experts_per_tok = 0;
  int n_group = 1;
  int topk_group = 1;
  TopkMethod topk_method = TopkMethod::kGreedy;
  ScoringFunc scoring_func = ScoringFunc::kSoftmax;
  bool norm_topk_prob = false;
  double routed_scaling_factor = 1.0;
  int first_k_dense_replace = 0;
  int moe_layer_freq = 1;

  int max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  Fp8Quantization fp8;

  int32_t bos_token_id = -1;
  std::vector<int32_t> eos_token_ids;

  int qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  bool is_moe_layer(int layer) const {
    return n_routed_experts > 0 && layer >= first_k_dense_replace && layer % moe_layer_freq == 0;
  }

  // `source` names the file in error messages.
  static Result<ModelConfig> FromJson(const nlohmann::json& j, const std::string& source);
  // DIR/config.json, then eos/bos from DIR/generation_config.json when present.
  static Result<ModelConfig> Load(const std::string& model_dir);
};

}  // namespace deepinfer
