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
#include "model/deepseek_v4/config.h"

namespace deepinfer {

struct DeepseekV41Config : V4SharedFields {
  std::string architecture;  // DeepseekV41ForCausalLM
  bool has_vision = false;   // vision_config present (its weights are ignored: text-only)

  // One per layer, then one per DSpark block: 0 window only, 1 or 2 window + compressed KV.
  std::vector<int> compress_ratios;
  std::vector<int> kv_source_layer_ids;     // own a compressor; publish compressed KV + indexer keys
  std::vector<int> index_source_layer_ids;  // run an indexer (keys at KV sources, re-index elsewhere)
  int candidate_source_layer_id = -1;  // two-level top-k: candidate blocks chosen here
  int candidate_topk_blocks = 0;
  int candidate_block_size = 0;        // compressed entries per candidate block

  double gate_temp = 1.0;  // router: sqrt(softplus(logits / gate_temp))

  // Engram n-gram memory.
  std::vector<int> engram_layer_ids;
  std::vector<int> engram_num_embeddings;  // table rows per engram layer (the sum of its primes)
  int engram_max_ngram_size = 0;           // N: n-grams of 2..N tokens
  int engram_vocab_size = 0;               // the primes are drawn from here upward
  int engram_n_heads = 0;
  int engram_head_dim = 0;
  int engram_pad_id = 0;
  int engram_compressed_vocab_size = 0;

  int32_t image_token_id = -1;

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
