#include "model/config.h"

#include <nlohmann/json.hpp>

#include "model/config_json.h"
#include "model/json_fields.h"

namespace deepinfer {
using nlohmann::json;

Status parse_rope_scaling(const json& j, const std::string& source, RopeScaling& r) {
  auto it = j.find("rope_scaling");
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_object()) return Status::Error(source + ": field 'rope_scaling' must be an object or null");
  FieldReader f(*it, source + ": rope_scaling");
  std::string type = f.string("type");
  if (type.empty()) type = f.string("rope_type");
  if (type != "yarn") return Status::Error(source + ": rope_scaling type '" + type + "' is not supported (only 'yarn')");
  r.yarn = true;
  f.number("factor", r.factor, true);
  f.integer("original_max_position_embeddings", r.original_max_position_embeddings, false, 1);
  f.number("beta_fast", r.beta_fast, true);
  f.number("beta_slow", r.beta_slow, true);
  f.number("mscale", r.mscale);
  f.number("mscale_all_dim", r.mscale_all_dim);
  return f.status();
}

Status parse_fp8_quantization(const json& j, const std::string& source, bool ue8m0_scales, Fp8Quantization& q) {
  auto it = j.find("quantization_config");
  if (it == j.end() || it->is_null()) return Status::Ok();
  if (!it->is_object()) return Status::Error(source + ": field 'quantization_config' must be an object");
  FieldReader f(*it, source + ": quantization_config");
  const std::string method = f.string("quant_method");
  if (method != "fp8") return Status::Error(source + ": quantization_config.quant_method '" + method + "' is not supported (only 'fp8')");
  const std::string fmt = f.string("fmt");
  if (!fmt.empty() && fmt != "e4m3") return Status::Error(source + ": quantization_config.fmt '" + fmt + "' is not supported (only 'e4m3')");
  if (ue8m0_scales) {
    const std::string scale_fmt = f.string("scale_fmt");
    if (scale_fmt != "ue8m0")
      return Status::Error(source + ": quantization_config.scale_fmt '" + scale_fmt + "' is not supported (only 'ue8m0')");
    const std::string act = f.string("activation_scheme");
    if (!act.empty() && act != "dynamic")
      return Status::Error(source + ": quantization_config.activation_scheme '" + act + "' is not supported (only 'dynamic')");
  }
  DI_RETURN_IF_ERROR(f.status());
  q.enabled = true;
  auto bs = it->find("weight_block_size");
  if (bs != it->end() && !bs->is_null()) {
    if (!bs->is_array() || bs->size() != 2 || !(*bs)[0].is_number_integer() || !(*bs)[1].is_number_integer() ||
        (*bs)[0].get<int>() <= 0 || (*bs)[1].get<int>() <= 0)
      return Status::Error(source + ": quantization_config.weight_block_size must be two positive integers");
    q.block_rows = (*bs)[0].get<int>();
    q.block_cols = (*bs)[1].get<int>();
  }
  return Status::Ok();
}

Result<ModelConfig> ModelConfig::FromJson(const json& j, const std::string& source) {
  if (!j.is_object()) return Status::Error(source + ": not a JSON object");
  ModelConfig c;
  FieldReader f(j, source);

  DI_ASSIGN_OR_RETURN(c.architecture, architecture_name(j, source));
  if (c.architecture == "DeepseekV3ForCausalLM") c.is_v3 = true;
  else if (c.architecture != "DeepseekV2ForCausalLM")
    return Status::Error(source + ": architecture '" + c.architecture +
                         "' is not supported (DeepseekV3ForCausalLM, DeepseekV2ForCausalLM)");

  f.integer("vocab_size", c.vocab_size, true, 1);
  f.integer("hidden_size", c.hidden_size, true, 1);
  f.integer("intermediate_size", c.intermediate_size, true, 1);
  f.integer("num_hidden_layers", c.num_hidden_layers, true, 1);
  f.integer("num_attention_heads", c.num_attention_heads, true, 1);
  f.integer("num_nextn_predict_layers", c.num_nextn_predict_layers, false);
  f.integer("q_lora_rank", c.q_lora_rank, false);
  f.integer("kv_lora_rank", c.kv_lora_rank, true, 1);
  f.integer("qk_nope_head_dim", c.qk_nope_head_dim, true, 1);
  f.integer("qk_rope_head_dim", c.qk_rope_head_dim, true, 2);
  f.integer("v_head_dim", c.v_head_dim, true, 1);
  f.integer("n_routed_experts", c.n_routed_experts, false);
  f.integer("n_shared_experts", c.n_shared_experts, false);
  f.integer("num_experts_per_tok", c.num_experts_per_tok, c.n_routed_experts > 0, 1);
  f.integer("moe_intermediate_size", c.moe_intermediate_size, c.n_routed_experts > 0, 1);
  f.integer("n_group", c.n_group, false, 1);
  f.integer("topk_group", c.topk_group, false, 1);
  f.integer("first_k_dense_replace", c.first_k_dense_replace, false);
  f.integer("moe_layer_freq", c.moe_layer_freq, false, 1);
  f.integer("max_position_embeddings", c.max_position_embeddings, true, 1);
  f.number("routed_scaling_factor", c.routed_scaling_factor, true);
  f.number("rms_norm_eps", c.rms_norm_eps, true);
  f.number("rope_theta", c.rope_theta, true);
  f.boolean("norm_topk_prob", c.norm_topk_prob);
  f.boolean("tie_word_embeddings", c.tie_word_embeddings);
  f.integer("bos_token_id", c.bos_token_id, false);
  f.ids("eos_token_id", c.eos_token_ids);

  c.topk_method = c.is_v3 ? TopkMethod::kNoauxTc : TopkMethod::kGreedy;
  const std::string topk = f.string("topk_method");
  if (topk == "greedy") c.topk_method = TopkMethod::kGreedy;
  else if (topk == "group_limited_greedy") c.topk_method = TopkMethod::kGroupLimitedGreedy;
  else if (topk == "noaux_tc") c.topk_method = TopkMethod::kNoauxTc;
  else if (!topk.empty()) f.fail("topk_method '" + topk + "' is not supported (greedy, group_limited_greedy, noaux_tc)");

  c.scoring_func = c.is_v3 ? ScoringFunc::kSigmoid : ScoringFunc::kSoftmax;
  const std::string scoring = f.string("scoring_func");
  if (scoring == "softmax") c.scoring_func = ScoringFunc::kSoftmax;
  else if (scoring == "sigmoid") c.scoring_func = ScoringFunc::kSigmoid;
  else if (!scoring.empty()) f.fail("scoring_func '" + scoring + "' is not supported (softmax, sigmoid)");

  const std::string act = f.string("hidden_act");
  if (!act.empty() && act != "silu") f.fail("hidden_act '" + act + "' is not supported (only 'silu')");
  bool attention_bias = false;
  f.boolean("attention_bias", attention_bias);
  if (attention_bias) f.fail("attention_bias = true is not supported");
  int kv_heads = c.num_attention_heads;
  f.integer("num_key_value_heads", kv_heads, false, 1);
  if (kv_heads != c.num_attention_heads)
    f.fail("num_key_value_heads must equal num_attention_heads for multi-head latent attention");
  DI_RETURN_IF_ERROR(f.status());

  if (c.qk_rope_head_dim % 2 != 0) return Status::Error(source + ": qk_rope_head_dim must be even");
  if (c.n_routed_experts > 0) {
    if (c.num_experts_per_tok > c.n_routed_experts)
      return Status::Error(source + ": num_experts_per_tok exceeds n_routed_experts");
    if (c.n_routed_experts % c.n_group != 0)
      return Status::Error(source + ": n_routed_experts must be divisible by n_group");
    if (c.topk_group > c.n_group) return Status::Error(source + ": topk_group exceeds n_group");
    if (c.topk_method == TopkMethod::kNoauxTc && c.n_routed_experts / c.n_group < 2)
      return Status::Error(source + ": noaux_tc routing needs at least 2 experts per group");
    if (c.topk_method != TopkMethod::kGreedy &&
        c.num_experts_per_tok > c.topk_group * (c.n_routed_experts / c.n_group))
      return Status::Error(source + ": num_experts_per_tok exceeds the experts in topk_group groups");
  }
  DI_RETURN_IF_ERROR(parse_rope_scaling(j, source, c.rope_scaling));
  DI_RETURN_IF_ERROR(parse_fp8_quantization(j, source, /*ue8m0_scales=*/false, c.fp8));
  return c;
}

Result<ModelConfig> ModelConfig::Load(const std::string& model_dir) { return load_config<ModelConfig>(model_dir); }

}  // namespace deepinfer
