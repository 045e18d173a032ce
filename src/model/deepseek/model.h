// DeepseekModel: DeepSeek-V2/V3 (MLA + DeepSeekMoE) forward pass on a Backend, in f32 with
// weights dequantized in the kernels. MLA runs absorbed: the cache holds only the normalized
// latent and the roped key part per token and layer.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "model/causal_lm.h"
#include "model/config.h"
#include "model/deepseek/weights.h"
#include "model/expert_parallel_moe.h"
#include "model/deepseek/yarn_rope.h"
#include "model/safetensors.h"

namespace deepinfer {

class DeepseekModel final : public CausalLM {
 public:
  static Result<std::unique_ptr<DeepseekModel>> Load(const std::string& model_dir, const ModelOptions& options,
                                                      Backend& backend);

  const CausalLMInfo& info() const override { return info_; }
  // One kind, "latent": a slab per layer of [block_size] MlaCacheLayout entries per block.
  Result<std::vector<KvKindSpec>> kv_kinds(DType cache_dtype, int block_size) const override;
  void forward(const ForwardBatch& batch, const KvCacheView& kv, float* logits) override;

  const ModelConfig& config() const { return config_; }
  const DeepseekWeights& weights() const { return *weights_; }

 private:
  DeepseekModel(ModelConfig c, Checkpoint ckpt, std::unique_ptr<DeepseekWeights> w, const ModelOptions& options,
                Backend& backend);

  // Each stage reads and writes the scratch buffers below; n = batch rows.
  void attention(int layer, const ForwardBatch& batch, const KvCacheView& kv, const float* h, float* out);
  void dense_mlp(const MlpWeights& w, const float* h, int64_t n, int64_t inter, float* out);
  void moe(const MoeWeights& w, const float* h, int64_t n, float* out);
  MlaCacheLayout cache_layout(DType cache_dtype) const {
    return {cache_dtype, config_.kv_lora_rank, config_.qk_rope_head_dim};
  }

  ModelConfig config_;
  Checkpoint ckpt_;  // owns the mappings the weights point into
  std::unique_ptr<DeepseekWeights> weights_;
  Backend& backend_;
  YarnRope rope_;
  CausalLMInfo info_;
  std::unique_ptr<ExpertParallelMoe> ep_;  // with ModelOptions::expert_group: routed experts across ranks

  struct Scratch {  // reused across steps; sized on demand
    std::vector<float> x, h, q_a, q, kv_a, latent, q_latent, o_latent, o, tmp, act, router_logits,
        expert_weights;
    std::vector<int32_t> expert_ids;
    std::vector<MlpWeightRefs> experts;
  } s_;
};

}  // namespace deepinfer
