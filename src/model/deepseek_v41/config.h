// DeepseekV41Config: a published DeepSeek-V4.1 config.json (DeepseekV41ForCausalLM), validated.
// The file is composite: the text model's fields sit in `text_config`; `vision_config` (a ViT
// this engine does not run: text-only), `quantization_config` and `image_token_id` at the top.
// Names follow config.json. Every key must be known, at the top and in text_config: one that is
// not understood is an error naming it. Both spellings of the Engram pad id are accepted
// (`engram_pad_id` of the reference's config class, `engram_pad_token_id` of the release).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"
#include "model/config.h"
#include "model/deepseek_v4/config.h"

namespace deepinfer {

struct DeepseekV41Config {
  std::string architecture;  // DeepseekV41ForCausalLM
  bool has_vision = false;   // vision_config present (its weights are ignored: text-only)

  int vocab_size = 0;
  int hidden_size = 0;
  int num_hidden_layers = 0;
  int num_nextn_predict_layers = 0;  // DSpark draft blocks (mtp.N.*), set aside
  int max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;

  // Attention: as V4 (one shared K=V head of head_dim, RoPE on the last qk_rope_head_dim, grouped
  // low-rank output, sinks, sliding window in every layer).
  int num_attention_heads = 0;
  int head_dim = 0;
  int qk_rope_head_dim = 0;
  int q_lora_rank = 0;
  int o_groups = 1;
  int o_lora_rank = 0;
  int sliding_window = 0;
  // One per layer, then one per DSpark block: 0 window only, 1 or 2 window + compressed KV.
  std::vector<int> compress_ratios;
  std::vector<int> kv_source_layer_ids;     // own a compressor; publish compressed KV + indexer keys
  std::vector<int> index_source_layer_ids;  // run an indexer (keys at KV sources, re-index elsewhere)
  int index_n_heads = 0;
  int index_head_dim = 0;
  int index_topk = 0;
  int candidate_source_layer_id = -1;  // two-level top-k: candidate blocks chosen here
  int candidate_topk_blocks = 0;
  int candidate_block_size = 0;        // compressed entries per candidate block
  double rope_theta = 10000.0;
  double compress_rope_theta = 10000.0;
  RopeScaling rope_scaling;             // compressed layers only

  int hc_mult = 1;
  int hc_sinkhorn_iters = 1;
  double hc_eps = 1e-6;

  int n_routed_experts = 0;
  int n_shared_experts = 0;
  int num_experts_per_tok = 0;
  int moe_intermediate_size = 0;
  double routed_scaling_factor = 1.0;
  double swiglu_limit = 0.0;  // routed and shared experts
  double gate_temp = 1.0;     // router: sqrt(softplus(logits / gate_temp))

  // Engram n-gram memory.
  std::vector<int> engram_layer_ids;
  std::vector<int> engram_num_embeddings;  // table rows per engram layer (the sum of its primes)
  int engram_max_ngram_size = 0;           // N: n-grams of 2..N tokens
  int engram_vocab_size = 0;               // the primes are drawn from here upward
  int engram_n_heads = 0;
  int engram_head_dim = 0;
  int engram_pad_id = 0;
  int engram_compressed_vocab_size = 0;

  V4Quantization quant;  // fp8 e4m3 with ue8m0 scales per weight_block_size; FP4 experts

  int32_t bos_token_id = -1;
  int32_t image_token_id = -1;
  std::vector<int32_t> eos_token_ids;

  int compress_ratio(int layer) const { return compress_ratios[size_t(layer)]; }
  bool is_kv_source(int layer) const;
  bool is_index_source(int layer) const;
  // The KV source whose compressed entries `layer` reads (the latest at or before it), or -1.
  int kv_source_of(int layer) const;
  // Index of `layer` in engram_layer_ids, or -1.
  int engram_index(int layer) const;

  static Result<DeepseekV41Config> FromJson(const nlohmann::json& j, const std::string& source);
  // DIR/config.json, then eos/bos from DIR/generation_config.json when present.
  static Result<DeepseekV41Config> Load(const std::string& model_dir);
};

}  // namespace deepinfer
