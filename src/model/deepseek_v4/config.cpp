#include "model/deepseek_v4/config.h"

#include <set>

#include <nlohmann/json.hpp>

#include "model/config_json.h"
#include "model/json_fields.h"

namespace deepinfer {
namespace {

using nlohmann::json;

// Keys read below, plus those that describe the file without changing the math.
const std::set<std::string>& known_keys() {
  static const std::set<std::string> keys = {
      "architectures", "model_type", "torch_dtype", "dtype", "transformers_version", "use_cache",
      "initializer_range", "attention_dropout", "attention_bias", "hidden_act", "bos_token_id", "eos_token_id",
      "pad_token_id", "vocab_size", "hidden_size", "num_hidden_layers", "num_nextn_predict_layers",
      "max_position_embeddings", "rms_norm_eps", "tie_word_embeddings", "num_attention_heads",
      "num_key_value_heads", "head_dim", "qk_rope_head_dim", "q_lora_rank", "o_groups", "o_lora_rank",
      "sliding_window", "compress_ratios", "index_n_heads", "index_head_dim", "index_topk", "rope_theta",
      "compress_rope_theta", "rope_scaling", "hc_mult", "hc_sinkhorn_iters", "hc_eps", "n_routed_experts",
      "n_shared_experts", "num_experts_per_tok", "moe_intermediate_size", "num_hash_layers",
      "routed_scaling_factor", "swiglu_limit", "scoring_func", "topk_method", "norm_topk_prob",
      "quantization_config", "expert_dtype"};
  return keys;
}

}  // namespace

void read_v4_shared_fields(FieldReader& f, V4SharedFields& c) {
  f.integer("vocab_size", c.vocab_size, true, 1);
  f.integer("hidden_size", c.hidden_size, true, 1);
  f.integer("num_hidden_layers", c.num_hidden_layers, true, 1);
  f.integer("num_nextn_predict_layers", c.num_nextn_predict_layers, false);
  f.integer("max_position_embeddings", c.max_position_embeddings, true, 1);
  f.number("rms_norm_eps", c.rms_norm_eps, true);
  f.boolean("tie_word_embeddings", c.tie_word_embeddings);
  f.integer("num_attention_heads", c.num_attention_heads, true, 1);
  f.integer("head_dim", c.head_dim, true, 2);
  f.integer("qk_rope_head_dim", c.qk_rope_head_dim, true, 2);
  f.integer("q_lora_rank", c.q_lora_rank, true, 1);
  f.integer("o_groups", c.o_groups, true, 1);
  f.integer("o_lora_rank", c.o_lora_rank, true, 1);
  f.integer("sliding_window", c.sliding_window, true, 1);
  f.integer("index_n_heads", c.index_n_heads, true, 1);
  f.integer("index_head_dim", c.index_head_dim, true, 2);
  f.integer("index_topk", c.index_topk, true, 1);
  f.number("rope_theta", c.rope_theta, true);
  f.number("compress_rope_theta", c.compress_rope_theta, true);
  f.integer("hc_mult", c.hc_mult, true, 1);
  f.integer("hc_sinkhorn_iters", c.hc_sinkhorn_iters, true, 1);
  f.number("hc_eps", c.hc_eps, true);
  f.integer("n_routed_experts", c.n_routed_experts, true, 1);
  f.integer("n_shared_experts", c.n_shared_experts, false);
  f.integer("num_experts_per_tok", c.num_experts_per_tok, true, 1);
  f.integer("moe_intermediate_size", c.moe_intermediate_size, true, 1);
  f.number("routed_scaling_factor", c.routed_scaling_factor, true);
  f.number("swiglu_limit", c.swiglu_limit);
  f.integer("bos_token_id", c.bos_token_id, false);
  f.ids("eos_token_id", c.eos_token_ids);
  int kv_heads = 1;
  f.integer("num_key_value_heads", kv_heads, false, 1);
  if (kv_heads != 1) f.fail("num_key_value_heads must be 1 (one shared K=V head)");
  bool attention_bias = false;
  f.boolean("attention_bias", attention_bias);
  if (attention_bias) f.fail("attention_bias = true is not supported");
  bool norm_topk_prob = true;
  f.boolean("norm_topk_prob", norm_topk_prob);
  if (!norm_topk_prob) f.fail("norm_topk_prob = false is not supported (sqrtsoftplus weights are normalized)");
  const std::string act = f.string("hidden_act");
  if (!act.empty() && act != "silu") f.fail("hidden_act '" + act + "' is not supported (only 'silu')");
  const std::string scoring = f.string("scoring_func");
  if (!scoring.empty() && scoring != "sqrtsoftplus") f.fail("scoring_func '" + scoring + "' is not supported (only 'sqrtsoftplus')");
  const std::string topk = f.string("topk_method");
  if (!topk.empty() && topk != "noaux_tc") f.fail("topk_method '" + topk + "' is not supported (only 'noaux_tc')");
}

Status check_v4_shared_fields(const V4SharedFields& c, const std::string& source) {
  auto fail = [&](const std::string& m) { return Status::Error(source + ": " + m); };
  if (c.num_attention_heads % c.o_groups != 0) return fail("num_attention_heads must be divisible by o_groups");
  if (c.num_experts_per_tok > c.n_routed_experts) return fail("num_experts_per_tok exceeds n_routed_experts");
  if (c.n_routed_experts > 1024 || c.num_experts_per_tok > 64 || c.hc_mult > 64)
    return fail("n_routed_experts > 1024, num_experts_per_tok > 64 or hc_mult > 64 is not supported");
  if (c.quant.enabled && c.o_lora_rank % c.quant.block_rows != 0)
    return fail("o_lora_rank must be a multiple of quantization_config.weight_block_size[0] (wo_a is split by group)");
  return Status::Ok();
}

Result<DeepseekV4Config> DeepseekV4Config::FromJson(const json& j, const std::string& source) {
  if (!j.is_object()) return Status::Error(source + ": not a JSON object");
  DI_RETURN_IF_ERROR(check_known_keys(j, known_keys(), source, "DeepSeek-V4"));
  DeepseekV4Config c;
  DI_RETURN_IF_ERROR(check_architecture(j, source, "DeepseekV4ForCausalLM"));
  c.architecture = "DeepseekV4ForCausalLM";

  FieldReader f(j, source);
  read_v4_shared_fields(f, c);
  f.integer("num_hash_layers", c.num_hash_layers, false);
  const std::string expert_dtype = f.string("expert_dtype");
  if (!expert_dtype.empty() && expert_dtype != "fp4" && expert_dtype != "fp8" && expert_dtype != "bf16")
    f.fail("expert_dtype '" + expert_dtype + "' is not supported (fp4, fp8, bf16)");
  DI_RETURN_IF_ERROR(f.status());

  auto cr = j.find("compress_ratios");
  const size_t n_ratios = size_t(c.num_hidden_layers + c.num_nextn_predict_layers);
  if (cr == j.end() || !cr->is_array() || cr->size() != n_ratios)
    return Status::Error(source + ": field 'compress_ratios' must list " + std::to_string(n_ratios) +
                         " integers (num_hidden_layers + num_nextn_predict_layers)");
  for (const auto& r : *cr) {
    if (!r.is_number_integer() || r.get<int64_t>() < 0 || r.get<int64_t>() == 1 || r.get<int64_t>() > 65536)
      return Status::Error(source + ": compress_ratios entry " + r.dump() + " must be 0 or an integer ratio >= 2");
    c.compress_ratios.push_back(r.get<int>());
  }
  auto fail = [&](const std::string& m) { return Status::Error(source + ": " + m); };
  if (c.qk_rope_head_dim % 2 != 0 || c.qk_rope_head_dim > c.head_dim)
    return fail("qk_rope_head_dim must be even and at most head_dim");
  if (c.qk_rope_head_dim > c.index_head_dim) return fail("qk_rope_head_dim must be at most index_head_dim");
  if (c.num_hash_layers > c.num_hidden_layers) return fail("num_hash_layers exceeds num_hidden_layers");
  DI_RETURN_IF_ERROR(parse_rope_scaling(j, source, c.rope_scaling));
  DI_RETURN_IF_ERROR(parse_fp8_quantization(j, source, /*ue8m0_scales=*/true, c.quant));
  DI_RETURN_IF_ERROR(check_v4_shared_fields(c, source));
  return c;
}

Result<DeepseekV4Config> DeepseekV4Config::Load(const std::string& model_dir) { return load_config<DeepseekV4Config>(model_dir); }

}  // namespace deepinfer
