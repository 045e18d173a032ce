// DeepseekV4Config: the fields of a published DeepSeek-V4 config.json (DeepseekV4ForCausalLM),
// validated. Names follow config.json. Every key must be known: one that would change the math
// and is not understood is an error naming it, never silently ignored.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"
#include "model/config.h"

namespace deepinfer {

// quantization_config of V4 checkpoints: e4m3 linears with UE8M0 (F8_E8M0) `.scale` per block;
// routed experts in FP4 e2m1 (I8 packed nibbles) with UE8M0 scales per 32 inputs.
struct V4Quantization {
  bool enabled = false;
  int block_rows = 128;  // weight_block_size[0]
  int block_cols = 128;  // weight_block_size[1]
};

// Reads j["quantization_config"] when present (absent or null: not quantized); errors name `source`.
Status parse_v4_quantization(const nlohmann::json& j, const std::string& source, V4Quantization& q);

struct DeepseekV4Config {
  std::string architecture;  // DeepseekV4ForCausalLM

  int vocab_size = 0;
  int hidden_size = 0;
  int num_hidden_layers = 0;
  int num_nextn_predict_layers = 0;  // MTP blocks (mtp.N.*), loaded and set aside
  int max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;

  // Attention: q_lora_rank -> n_heads x head_dim queries, one shared K=V head of head_dim,
  // RoPE on the last qk_rope_head_dim dims, grouped low-rank output.
  int num_attention_heads = 0;
  int head_dim = 0;
  int qk_rope_head_dim = 0;
  int q_lora_rank = 0;
  int o_groups = 1;
  int o_lora_rank = 0;
  int sliding_window = 0;
  // One per layer, then one per MTP block: 0 sliding window only, 4 compressed sparse attention
  // (overlapping windows, lightning indexer), any other r > 1 heavily compressed attention.
  std::vector<int> compress_ratios;
  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;
  double rope_theta = 10000.0;           // sliding-only layers, no YaRN
  double compress_rope_theta = 10000.0;  // compressed layers, with rope_scaling
  RopeScaling rope_scaling;

  // Hyper-connections: hc_mult residual streams.
  int hc_mult = 1;
  int hc_sinkhorn_iters = 1;
  double hc_eps = 1e-6;

  // MoE: sqrtsoftplus scores + bias (noaux_tc) or, in the first num_hash_layers, tid2eid.
  int n_routed_experts = 0;
  int n_shared_experts = 0;
  int num_experts_per_tok = 0;
  int moe_intermediate_size = 0;
  int num_hash_layers = 0;
  double routed_scaling_factor = 1.0;
  double swiglu_limit = 0.0;  // routed experts: gate <= limit, |up| <= limit; 0: no clamp

  V4Quantization quant;

  int32_t bos_token_id = -1;
  std::vector<int32_t> eos_token_ids;

  int compress_ratio(int layer) const { return compress_ratios[size_t(layer)]; }
  bool is_hash_layer(int layer) const { return layer < num_hash_layers; }

  static Result<DeepseekV4Config> FromJson(const nlohmann::json& j, const std::string& source);
  // DIR/config.json, then eos/bos from DIR/generation_config.json when present.
  static Result<DeepseekV4Config> Load(const std::string& model_dir);
};

}  // namespace deepinfer
