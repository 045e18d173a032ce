// The tensors of a DeepSeek-V2/V3 checkpoint, bound by Hugging Face name to typed views, with
// every shape and dtype checked against the config. Linear weights stay in the checkpoint's
// mapping in stored precision; only norm vectors and router biases are converted to f32.
// Precisions: BF16, F16, F32; F8_E4M3 with `<name>.weight_scale_inv` F32 block scales (config.json's
// fp8 quantization_config, as DeepSeek-V3 ships); and, for every linear the model multiplies
// through linear, swiglu or moe (all but the embedding, the routers and kv_b_proj), FP4 as
// DeepSeek-V4 ships its experts: I8 `<name>.weight` [out, in / 2] with F8_E8M0 `<name>.scale`
// [out, in / 32] (model/fp4_weight.h), bound packed (F4_E2M1); no config entry: the dtype says it.
#pragma once

#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/aligned_vector.h"
#include "kernels/ops.h"
#include "model/config.h"
#include "model/expert_group.h"
#include "model/safetensors.h"

namespace deepinfer {

struct MlpWeights {  // SwiGLU: down(silu(gate(x)) * up(x))
  LinearWeight gate;  // [intermediate, hidden]
  LinearWeight up;    // [intermediate, hidden]
  LinearWeight down;  // [hidden, intermediate]
};

struct MlaWeights {
  LinearWeight q_proj;          // [heads * qk_head_dim, hidden]       when q_lora_rank == 0
  LinearWeight q_a_proj;        // [q_lora_rank, hidden]                otherwise
  std::vector<float> q_a_norm;  // [q_lora_rank]
  LinearWeight q_b_proj;        // [heads * qk_head_dim, q_lora_rank]
  LinearWeight kv_a_proj;       // [kv_lora_rank + qk_rope_head_dim, hidden]
  std::vector<float> kv_a_norm; // [kv_lora_rank]
  LinearWeight kv_b_proj;       // [heads * (qk_nope_head_dim + v_head_dim), kv_lora_rank]
  LinearWeight o_proj;          // [hidden, heads * v_head_dim]
};

struct MoeWeights {
  LinearWeight router;             // [n_routed_experts, hidden]  (mlp.gate.weight)
  std::vector<float> router_bias;  // [n_routed_experts] e_score_correction_bias, or empty
  std::vector<MlpWeights> experts; // [n_routed_experts], each moe_intermediate_size wide; with an
                                   // ExpertPlacement only the held ones are bound (others: null data)
  bool has_shared = false;
  MlpWeights shared;               // n_shared_experts * moe_intermediate_size wide
};

struct LayerWeights {
  std::vector<float> input_norm;      // [hidden]
  std::vector<float> post_attn_norm;  // [hidden]
  MlaWeights attn;
  bool is_moe = false;
  MlpWeights mlp;  // dense layers
  MoeWeights moe;  // MoE layers
};

// DeepSeek-V3's multi-token-prediction layer model.layers.{num_hidden_layers} (the first of
// num_nextn_predict_layers): h' = eh_proj([enorm(embed(t)) | hnorm(h)]), then a decoder layer,
// then logits = head(head_norm(.)). The embedding is the model's (the checkpoint's copy under the
// layer holds the same values and is not read).
struct MtpLayerWeights {
  std::vector<float> enorm;      // [hidden]
  std::vector<float> hnorm;      // [hidden]
  LinearWeight eh_proj;          // [hidden, 2 * hidden]
  LayerWeights block;            // as a main layer of that index (MoE or dense by the config)
  std::vector<float> head_norm;  // [hidden] shared_head.norm
  LinearWeight head;             // [vocab, hidden] shared_head.head
};

struct DeepseekWeights {
  LinearWeight embed;         // [vocab, hidden]; rows looked up
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [hidden]
  LinearWeight lm_head;       // [vocab, hidden] (the embedding when tied)
  std::unique_ptr<MtpLayerWeights> mtp;  // bound only when asked for (Bind's bind_mtp)
  size_t n_params = 0;        // parameters bound (the MTP layer's only when bound)
  size_t n_bytes = 0;         // their bytes in stored precision

  // Checks and binds every tensor; errors name the file and tensor. With a placement, of the
  // routed experts only those it gives this rank: the others' tensors are never read or touched.
  // bind_mtp: also the first MTP layer (an error where config.json has num_nextn_predict_layers 0).
  static Result<std::unique_ptr<DeepseekWeights>> Bind(const Checkpoint& ckpt, const ModelConfig& c,
                                                       const std::string& model_dir,
                                                       const ExpertPlacement* placement = nullptr,
                                                       bool bind_mtp = false);

  // Expert parallelism: binds exactly the routed experts `held` (ascending) of MoE layer `layer`,
  // checked as Bind checks them, with the activation dtype of the layer's shared experts (or of
  // an expert bound before), and relaid after relay. Returns the experts it newly bound and unbinds
  // the rest: `dropped` gets their weights as mapped, whose pages the caller releases (the mapping
  // stays); relaid copies are freed here.
  Result<std::vector<int32_t>> rebind_experts(const Checkpoint& ckpt, const ModelConfig& c, const std::string& model_dir,
                                              int layer, std::span<const int32_t> held, std::vector<MlpWeights>& dropped);

  // Sets act_dtype BF16 on every linear weight that admits it (bf16, FP4, and fp8 with blocks of a
  // multiple of 32 columns: admits_bf16_activations) and that the model multiplies through
  // linear, swiglu or moe (ModelOptions::activation_dtype): all but the embedding, the routers
  // and kv_b_proj (absorbed into attention).
  void use_bf16_activations();

  // ModelOptions::lm_head_dtype: the lm_head, where stored in bf16, f16 or f32, becomes fp8 with
  // 128 x 128 block scales or int8 with a scale per row and 128 columns (`to`: F8_E4M3 or I8_SM;
  // model/fp8_requantize.h) in memory of its own, and its stored pages are dropped (kept when tied:
  // the embedding reads them). Before use_bf16_activations and relay, which then treat it as any
  // weight of its dtype. True where it was requantized; an error names the tensor (a NaN or an
  // infinity in it).
  Result<bool> requantize_lm_head(const std::string& model_dir, DType to);

  // Copies every linear weight that the backend reads faster in another layout into that layout
  // (Backend::relay_weight; after use_bf16_activations, which decides the layouts), and drops the
  // stored bytes' pages from the process: the weight's memory moves rather than doubles. From then
  // on rebind_experts relays the experts it binds and frees the copies of those it drops. Returns
  // the bytes copied.
  size_t relay(Backend& backend);

 private:
  std::deque<std::vector<uint8_t>> realigned_;  // copies of tensors stored at unaligned offsets
  std::deque<UninitBytes> relaid_;    // weights in the backend's layout (relay)
  std::vector<std::vector<std::deque<UninitBytes>>> relaid_experts_;  // [layer][expert]: its relaid copies
  Backend* relay_backend_ = nullptr;  // set by relay
  AlignedVector<uint8_t> requantized_lm_head_;   // requantize_lm_head's codes and scales
  friend class WeightBinder;
};

}  // namespace deepinfer
