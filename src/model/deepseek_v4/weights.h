// The tensors of a DeepSeek-V4 checkpoint in the published layout (no "model." prefix:
// embed.weight, layers.N.attn.wq_a.weight, ..., mtp.0.*), bound by name with every shape and
// dtype checked against the config; errors name the file and tensor. Linear weights stay in the
// checkpoint's mapping in stored precision (BF16, or F8_E4M3 with UE8M0 block scales, converted
// to f32 scales); FP4 e2m1 routed experts (I8 packed nibbles, UE8M0 scales per 32) stay packed
// in the mapping too (LinearWeight F4_E2M1), which the kernels read at 4.25 bits per weight.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/aligned_vector.h"
#include "kernels/ops.h"
#include "model/deepseek_v4/clamped_moe.h"
#include "model/deepseek_v4/compressor.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/hyper_connection.h"
#include "model/deepseek_v4/indexer.h"
#include "model/deepseek_v4/sqrtsoftplus_router.h"
#include "model/expert_group.h"
#include "model/safetensors.h"

namespace deepinfer {

struct V4AttentionWeights {
  int compress_ratio = 0;          // 0: sliding window only; 4: CSA (+ indexer); else HCA
  LinearWeight wq_a;               // [q_lora_rank, hidden]
  std::vector<float> q_norm;       // [q_lora_rank]
  LinearWeight wq_b;               // [heads * head_dim, q_lora_rank]
  LinearWeight wkv;                // [head_dim, hidden]
  std::vector<float> kv_norm;      // [head_dim]
  std::vector<LinearWeight> wo_a;  // [o_groups], each rows g * o_lora_rank.. of wo_a: [o_lora_rank, heads * head_dim / o_groups]
  LinearWeight wo_b;               // [hidden, o_groups * o_lora_rank]
  std::vector<float> sink;         // [heads] attn_sink
  CompressorWeights compressor;    // compress_ratio > 0
  IndexerWeights indexer;          // compress_ratio == 4
};

struct V4BlockWeights {
  std::vector<float> attn_norm;  // [hidden]
  std::vector<float> ffn_norm;   // [hidden]
  HyperConnectionWeights hc_attn, hc_ffn;
  V4AttentionWeights attn;
  LinearWeight gate;             // [n_routed_experts, hidden] ffn.gate.weight
  SqrtSoftplusRouter router;
  std::vector<ExpertWeights> experts;  // [n_routed_experts]
  bool has_shared = false;
  ExpertWeights shared;          // n_shared_experts * moe_intermediate_size wide
};

// The multi-token-prediction block (mtp.N): loaded and checked, not run by the main model.
struct V4MtpWeights {
  std::vector<float> enorm, hnorm, norm;  // [hidden]
  LinearWeight e_proj, h_proj;            // [hidden, hidden]
  HyperConnectionWeights hc_head;
  V4BlockWeights block;
};

struct DeepseekV4Weights {
  LinearWeight embed;  // [vocab, hidden]
  std::vector<V4BlockWeights> layers;
  HyperConnectionWeights hc_head;
  std::vector<float> norm;  // [hidden]
  LinearWeight head;        // [vocab, hidden]
  std::vector<V4MtpWeights> mtp;
  size_t n_params = 0;  // parameters in the checkpoint (FP4: two per byte), MTP included
  size_t n_bytes = 0;   // their stored bytes

  // With a placement (expert parallelism), only the routed experts it holds are bound (their
  // pages alone are read); the others are left unbound (null data) in every main layer.
  static Result<std::unique_ptr<DeepseekV4Weights>> Bind(const Checkpoint& ckpt, const DeepseekV4Config& c,
                                                         const std::string& model_dir,
                                                         const ExpertPlacement* placement = nullptr);

  // ModelOptions::lm_head_dtype: the head, where stored in bf16, f16 or f32, becomes fp8 with
  // 128 x 128 block scales or int8 with a scale per row and 128 columns (`to`: F8_E4M3 or I8_SM;
  // model/fp8_requantize.h). Before use_bf16_activations and relay. True where it was requantized;
  // an error names the tensor (a NaN or an infinity in it).
  Result<bool> requantize_head(const std::string& model_dir, DType to);

  // Sets act_dtype BF16 on every linear weight that admits it (bf16, FP4, fp8 with blocks of a
  // multiple of 32 columns: admits_bf16_activations) of the main layers and the head
  // (ModelOptions::activation_dtype): projections, compressors, indexer, experts, shared experts. Not the embedding, the routers or the f32
  // hyper-connection matrices. fp8 weights whose scales are all UE8M0 powers of two in range also
  // get scales_fold (pow2_block_scales).
  void use_bf16_activations();

  // Copies every linear weight that the backend reads faster in another layout into that layout
  // (Backend::relay_weight; after use_bf16_activations, which decides the layouts: fp8 and FP4
  // tile-major on AMX) and drops the stored bytes' pages, so the memory moves rather than doubles.
  // Under expert parallelism the experts a rank holds (bound once, at load). Returns the bytes copied.
  size_t relay(Backend& backend);

 private:
  std::deque<std::vector<uint8_t>> owned_;  // realigned tensors, f32 scales
  std::deque<UninitBytes> relaid_;  // weights in the backend's layout (relay)
  AlignedVector<uint8_t> requantized_head_;    // requantize_head_fp8's codes and scales
  // f on every linear weight the main layers and the head multiply through Backend::linear
  // (projections, compressors, indexer, shared and routed experts, head).
  void for_each_projection(const std::function<void(LinearWeight&)>& f);
  friend class V4WeightBinder;
};

}  // namespace deepinfer
