#include "model/deepseek_v41/config.h"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "model/config_json.h"
#include "model/json_fields.h"

namespace deepinfer {
namespace {

using nlohmann::json;

// Top-level keys of the composite config.
const std::set<std::string>& known_top_keys() {
  static const std::set<std::string> keys = {
      "architectures", "model_type", "torch_dtype", "dtype", "transformers_version", "bos_token_id", "eos_token_id",
      "pad_token_id", "image_token_id", "text_config", "vision_config", "quantization_config", "tie_word_embeddings"};
  return keys;
}

// text_config keys read below, plus those that describe the file or name the DSpark draft blocks
// (set aside) without changing the main model's math.
const std::set<std::string>& known_text_keys() {
  static const std::set<std::string> keys = {
      "model_type", "torch_dtype", "dtype", "use_cache", "initializer_range", "attention_dropout", "attention_bias",
      "hidden_act", "bos_token_id", "eos_token_id", "pad_token_id", "vocab_size", "hidden_size",
      "num_hidden_layers", "num_nextn_predict_layers", "max_position_embeddings", "rms_norm_eps",
      "tie_word_embeddings", "num_attention_heads", "num_key_value_heads", "head_dim", "qk_rope_head_dim",
      "q_lora_rank", "o_groups", "o_lora_rank", "sliding_window", "compress_ratios", "kv_source_layer_ids",
      "index_source_layer_ids", "index_n_heads", "index_head_dim", "index_topk", "candidate_source_layer_id",
      "candidate_topk_blocks", "candidate_block_size", "rope_theta", "compress_rope_theta", "rope_scaling",
      "hc_mult", "hc_sinkhorn_iters", "hc_eps", "n_routed_experts", "n_shared_experts", "num_experts_per_tok",
      "moe_intermediate_size", "routed_scaling_factor", "swiglu_limit", "gate_temp", "scoring_func",
      "topk_method", "norm_topk_prob", "engram_layer_ids", "engram_num_embeddings", "engram_max_ngram_size",
      "engram_vocab_size", "engram_n_heads", "engram_head_dim", "engram_pad_id", "engram_pad_token_id",
      "engram_compressed_vocab_size", "dspark_block_size", "dspark_noise_token_id", "dspark_target_layer_ids",
      "dspark_markov_rank", "dspark_n_routed_experts", "dspark_num_experts_per_tok", "quantization_config",
      "expert_dtype"};
  return keys;
}

// A list of integers in [min_value, max_value]; missing means empty unless required.
Status int_list(const json& j, const char* key, const std::string& source, int min_value, int max_value,
                bool required, std::vector<int>& out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) return Status::Error(source + ": missing required field '" + key + "'");
    return Status::Ok();
  }
  if (!it->is_array()) return Status::Error(source + ": field '" + key + "' must be a list of integers");
  out.clear();
  for (const auto& v : *it) {
    if (!v.is_number_integer() || v.get<int64_t>() < min_value || v.get<int64_t>() > max_value)
      return Status::Error(source + ": field '" + key + "' entry " + v.dump() + " must be an integer in [" +
                           std::to_string(min_value) + ", " + std::to_string(max_value) + "]");
    out.push_back(v.get<int>());
  }
  return Status::Ok();
}

bool ascending(const std::vector<int>& v) { return std::adjacent_find(v.begin(), v.end(), std::greater_equal<int>()) == v.end(); }

Status read_text_config(const json& t, const std::string& src, DeepseekV41Config& c) {
  DI_RETURN_IF_ERROR(check_known_keys(t, known_text_keys(), src, "DeepSeek-V4.1"));
  FieldReader f(t, src);
  read_v4_shared_fields(f, c);
  f.integer("candidate_source_layer_id", c.candidate_source_layer_id, false, -1);
  f.integer("candidate_topk_blocks", c.candidate_topk_blocks, false);
  f.integer("candidate_block_size", c.candidate_block_size, false);
  f.number("gate_temp", c.gate_temp, true);
  f.integer("engram_max_ngram_size", c.engram_max_ngram_size, false);
  f.integer("engram_vocab_size", c.engram_vocab_size, false);
  f.integer("engram_n_heads", c.engram_n_heads, false);
  f.integer("engram_head_dim", c.engram_head_dim, false);
  f.integer("engram_compressed_vocab_size", c.engram_compressed_vocab_size, false);
  if (t.contains("engram_pad_id") && t.contains("engram_pad_token_id") && t["engram_pad_id"] != t["engram_pad_token_id"])
    f.fail("engram_pad_id and engram_pad_token_id disagree");
  f.integer("engram_pad_id", c.engram_pad_id, false);
  f.integer("engram_pad_token_id", c.engram_pad_id, false);
  DI_RETURN_IF_ERROR(f.status());

  const int L = c.num_hidden_layers;
  const int n_ratios = L + c.num_nextn_predict_layers;
  DI_RETURN_IF_ERROR(int_list(t, "compress_ratios", src, 0, 2, true, c.compress_ratios));
  if (int(c.compress_ratios.size()) != n_ratios)
    return Status::Error(src + ": field 'compress_ratios' must list " + std::to_string(n_ratios) +
                         " ratios (num_hidden_layers + num_nextn_predict_layers), each 0, 1 or 2");
  DI_RETURN_IF_ERROR(int_list(t, "kv_source_layer_ids", src, 0, L - 1, false, c.kv_source_layer_ids));
  DI_RETURN_IF_ERROR(int_list(t, "index_source_layer_ids", src, 0, L - 1, false, c.index_source_layer_ids));
  DI_RETURN_IF_ERROR(int_list(t, "engram_layer_ids", src, 0, L - 1, false, c.engram_layer_ids));
  DI_RETURN_IF_ERROR(int_list(t, "engram_num_embeddings", src, 1, 1 << 30, false, c.engram_num_embeddings));
  DI_RETURN_IF_ERROR(parse_rope_scaling(t, src, c.rope_scaling));
  DI_RETURN_IF_ERROR(parse_fp8_quantization(t, src, /*ue8m0_scales=*/true, c.quant));

  auto fail = [&](const std::string& m) { return Status::Error(src + ": " + m); };
  if (!ascending(c.kv_source_layer_ids) || !ascending(c.index_source_layer_ids) || !ascending(c.engram_layer_ids))
    return fail("kv_source_layer_ids, index_source_layer_ids and engram_layer_ids must be strictly ascending");
  for (int l = 0; l < L; ++l) {
    const int r = c.compress_ratio(l), src_layer = c.kv_source_of(l);
    if (r == 0) {
      if (c.is_kv_source(l) || c.is_index_source(l))
        return fail("layer " + std::to_string(l) + " has compress ratio 0 but is a KV or index source");
      continue;
    }
    if (src_layer < 0) return fail("layer " + std::to_string(l) + " is compressed but no KV source precedes it");
    if (c.compress_ratio(src_layer) != r)
      return fail("layer " + std::to_string(l) + " has compress ratio " + std::to_string(r) + " but its KV source " +
                  std::to_string(src_layer) + " has " + std::to_string(c.compress_ratio(src_layer)));
    if (c.is_kv_source(l) && !c.is_index_source(l))
      return fail("KV source layer " + std::to_string(l) + " must be an index source (it publishes indexer keys)");
  }
  for (int l = 0; l < L; ++l) {  // every compressed layer reads a top-k chosen at or after its KV source
    if (c.compress_ratio(l) == 0) continue;
    bool indexed = false;
    for (int i : c.index_source_layer_ids) indexed |= i >= c.kv_source_of(l) && i <= l;
    if (!indexed) return fail("compressed layer " + std::to_string(l) + " has no index source since its KV source");
  }
  if (c.candidate_source_layer_id >= 0) {
    if (c.candidate_source_layer_id >= L || !c.is_index_source(c.candidate_source_layer_id))
      return fail("candidate_source_layer_id must be an index source layer");
    if (c.candidate_topk_blocks < 1 || c.candidate_block_size < 1)
      return fail("candidate_topk_blocks and candidate_block_size must be positive with a candidate source");
  }
  if (c.qk_rope_head_dim % 2 != 0 || c.qk_rope_head_dim > c.head_dim || c.qk_rope_head_dim > c.index_head_dim)
    return fail("qk_rope_head_dim must be even and at most head_dim and index_head_dim");
  DI_RETURN_IF_ERROR(check_v4_shared_fields(c, src));
  if (!c.engram_layer_ids.empty()) {
    if (c.engram_num_embeddings.size() != c.engram_layer_ids.size())
      return fail("engram_num_embeddings must list one table size per engram layer");
    if (c.engram_max_ngram_size < 2 || c.engram_n_heads < 1 || c.engram_head_dim < 1 || c.engram_vocab_size < 2 ||
        c.engram_compressed_vocab_size < 1 || c.engram_max_ngram_size > 16)
      return fail("engram layers need engram_max_ngram_size in [2, 16], engram_n_heads, engram_head_dim, "
                  "engram_vocab_size and engram_compressed_vocab_size");
  }
  return Status::Ok();
}

}  // namespace

bool DeepseekV41Config::is_kv_source(int layer) const {
  return std::find(kv_source_layer_ids.begin(), kv_source_layer_ids.end(), layer) != kv_source_layer_ids.end();
}

bool DeepseekV41Config::is_index_source(int layer) const {
  return std::find(index_source_layer_ids.begin(), index_source_layer_ids.end(), layer) != index_source_layer_ids.end();
}

int DeepseekV41Config::kv_source_of(int layer) const {
  int s = -1;
  for (int k : kv_source_layer_ids)
    if (k <= layer) s = k;
  return s;
}

int DeepseekV41Config::engram_index(int layer) const {
  auto it = std::find(engram_layer_ids.begin(), engram_layer_ids.end(), layer);
  return it == engram_layer_ids.end() ? -1 : int(it - engram_layer_ids.begin());
}

Result<DeepseekV41Config> DeepseekV41Config::FromJson(const json& j, const std::string& source) {
  if (!j.is_object()) return Status::Error(source + ": not a JSON object");
  DI_RETURN_IF_ERROR(check_known_keys(j, known_top_keys(), source, "DeepSeek-V4.1"));
  DeepseekV41Config c;
  DI_RETURN_IF_ERROR(check_architecture(j, source, "DeepseekV41ForCausalLM"));
  c.architecture = "DeepseekV41ForCausalLM";
  auto text = j.find("text_config");
  if (text == j.end() || !text->is_object()) return Status::Error(source + ": field 'text_config' must be an object");
  auto vision = j.find("vision_config");
  if (vision != j.end() && !vision->is_null() && !vision->is_object())
    return Status::Error(source + ": field 'vision_config' must be an object");
  c.has_vision = vision != j.end() && vision->is_object();
  // Top-level ids and quantization first; text_config may restate them.
  FieldReader f(j, source);
  f.integer("bos_token_id", c.bos_token_id, false);
  f.integer("image_token_id", c.image_token_id, false);
  f.ids("eos_token_id", c.eos_token_ids);
  f.boolean("tie_word_embeddings", c.tie_word_embeddings);
  DI_RETURN_IF_ERROR(f.status());
  DI_RETURN_IF_ERROR(parse_fp8_quantization(j, source, /*ue8m0_scales=*/true, c.quant));
  DI_RETURN_IF_ERROR(read_text_config(*text, source + ": text_config", c));
  return c;
}

Result<DeepseekV41Config> DeepseekV41Config::Load(const std::string& model_dir) {
  return load_config<DeepseekV41Config>(model_dir);
}

}  // namespace deepinfer
