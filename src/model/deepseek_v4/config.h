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

class FieldReader;

// The fields DeepSeek-V4.1 keeps from V4, read the same way from V4's config.json and V4.1's
// text_config.
struct V4SharedFields {
  int vocab_size = 0;
  int hidden_size = 0;
  int num_hidden_layers = 0;
  int num_nextn_predict_layers = 0;  // blocks after the main layers (mtp.N.*): V4's MTP, V4.1's DSpark
  int max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;

  // Attention: q_lora_rank -> n_heads x head_dim queries, one shared K=V head of head_dim,
  // RoPE on the last qk_rope_head_dim dims, grouped low-rank output, sinks, a sliding window.
  int num_attention_heads = 0;
  int head_dim = 0;
  int qk_rope_head_dim = 0;
  int q_lora_rank = 0;
  int o_groups = 1;
  int o_lora_rank = 0;
  int sliding_window = 0;
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

  // MoE with sqrtsoftplus scores (noaux_tc, normalized weights).
  int n_routed_experts = 0;
  int n_shared_experts = 0;
  int num_experts_per_tok = 0;
  int moe_intermediate_size = 0;
  double routed_scaling_factor = 1.0;
  double swiglu_limit = 0.0;  // gate <= limit, |up| <= limit (V4: routed experts; V4.1: all); 0: no clamp

  // fp8 e4m3 linears with UE8M0 (F8_E8M0) `.scale` per weight_block_size; routed experts in FP4
  // e2m1 (I8 packed nibbles) with UE8M0 scales per 32 inputs.
  Fp8Quantization quant;

  int32_t bos_token_id = -1;
  std::vector<int32_t> eos_token_ids;
};

// Reads the shared fields of `f`'s object, and the keys whose only supported value they imply
// (num_key_value_heads 1, attention_bias false, norm_topk_prob true, hidden_act silu,
// scoring_func sqrtsoftplus, topk_method noaux_tc); errors go to `f`.
void read_v4_shared_fields(FieldReader& f, V4SharedFields& c);
// The checks between shared fields once quantization_config is read; errors name `source`.
Status check_v4_shared_fields(const V4SharedFields& c, const std::string& source);

struct DeepseekV4Config : V4SharedFields {
  std::string architecture;  // DeepseekV4ForCausalLM

  // One per layer, then one per MTP block: 0 sliding window only, 4 compressed sparse attention
  // (overlapping windows, lightning indexer), any other r > 1 heavily compressed attention.
  std::vector<int> compress_ratios;
  // The first num_hash_layers route by tid2eid instead of scores + bias.
  int num_hash_layers = 0;

  int compress_ratio(int layer) const { return compress_ratios[size_t(layer)]; }
  bool is_hash_layer(int layer) const { return layer < num_hash_layers; }

  static Result<DeepseekV4Config> FromJson(const nlohmann::json& j, const std::string& source);
  // DIR/config.json, then eos/bos from DIR/generation_config.json when present.
  static Result<DeepseekV4Config> Load(const std::string& model_dir);
};

}  // namespace deepinfer
