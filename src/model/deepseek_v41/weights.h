// The tensors of a DeepSeek-V4.1 checkpoint in the published layout (no "model." prefix:
// embed.weight, layers.N.attn.wq_a.weight, ..., norm.weight, head.weight), bound by name with
// every shape and dtype checked against the config; errors name the file and tensor. Linear
// weights stay in stored precision (BF16, or F8_E4M3 with UE8M0 32x32 block scales; FP4 routed
// experts packed, block_scaled_weights.h). Engram tables stay in the
// mapping (BF16/F32, or F8_E4M3) with their per-row block scales. Set aside, recognized by
// prefix: the DSpark draft blocks (mtp.*) and the vision tower (vision.*, aligner.*, image_*).
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
#include "model/deepseek_v4/hyper_connection.h"
#include "model/deepseek_v4/indexer.h"
#include "model/deepseek_v4/sqrtsoftplus_router.h"
#include "model/deepseek_v41/config.h"
#include "model/expert_group.h"
#include "model/safetensors.h"

namespace deepinfer {

struct V41AttentionWeights {
  int compress_ratio = 0;          // 0: window only; 1 or 2: window + the KV source's compressed entries
  bool kv_source = false;          // owns the compressor and the indexer's key projection
  bool index_source = false;       // runs the indexer (scores the latest KV source's keys)
  LinearWeight wq_a;               // [q_lora_rank, hidden]
  std::vector<float> q_norm;       // [q_lora_rank]
  LinearWeight wq_b;               // [heads * head_dim, q_lora_rank]
  LinearWeight wkv;                // [head_dim, hidden]
  std::vector<float> kv_norm;      // [head_dim]
  std::vector<LinearWeight> wo_a;  // [o_groups], rows g * o_lora_rank.. of wo_a: [o_lora_rank, heads * head_dim / o_groups]
  LinearWeight wo_b;               // [hidden, o_groups * o_lora_rank]
  std::vector<float> sink;         // [heads]
  CompressorWeights compressor;    // kv_source: wkv [head_dim, hidden], wgate (ratio 2), norm; no ape
  IndexerWeights indexer;          // index_source: wq_b [index_heads * index_head_dim, q_lora_rank], weights_proj
  LinearWeight index_wk;           // kv_source: [index_head_dim, head_dim] keys from the compressed latent
  std::vector<float> index_k_norm; // kv_source: [index_head_dim]
};

// An Engram table: [rows, dim] in stored precision, row r's elements j scaled by
// scale[r, j / (dim / n_scale_cols)].
struct EngramTable {
  DType dtype = DType::BF16;  // BF16, F32 or F8_E4M3
  const uint8_t* data = nullptr;
  int64_t rows = 0, dim = 0;
  DType scale_dtype = DType::F32;  // F8_E8M0, F32 or BF16
  const uint8_t* scale = nullptr;  // [rows, n_scale_cols]
  int64_t n_scale_cols = 1;
  // Row r dequantized to f32 [dim].
  void row(int64_t r, float* out) const;
};

struct V41EngramWeights {
  EngramTable embed;               // [sum of the layer's primes, engram_head_dim]
  LinearWeight wkv;                // [(hc + 1) * hidden, (N - 1) * heads * engram_head_dim]
  std::vector<float> q_weight;     // [hc, hidden]
  std::vector<float> k_weight;     // [hc, hidden]
};

struct V41BlockWeights {
  std::vector<float> attn_norm;  // [hidden]
  std::vector<float> ffn_norm;   // [hidden]
  HyperConnectionWeights hc_attn, hc_ffn;
  V41AttentionWeights attn;
  bool has_engram = false;
  V41EngramWeights engram;
  LinearWeight gate;             // [n_routed_experts, hidden]
  SqrtSoftplusRouter router;     // gate.bias (text tokens; gate.bias_vl, for image tokens, is checked and unused)
  std::vector<ExpertWeights> experts;
  bool has_shared = false;
  ExpertWeights shared;
};

struct DeepseekV41Weights {
  LinearWeight embed;  // [vocab, hidden]
  std::vector<V41BlockWeights> layers;
  std::vector<float> norm;  // [hidden]
  LinearWeight head;        // [vocab, hidden]
  size_t n_params = 0;      // parameters bound (FP4: two per byte)
  size_t n_bytes = 0;       // their stored bytes
  size_t n_set_aside = 0;   // tensors recognized and not used: mtp.*, vision tower

  // With a placement (expert parallelism), only the routed experts it holds are bound (their
  // pages alone are read); the others are left unbound (null data) in every layer.
  static Result<std::unique_ptr<DeepseekV41Weights>> Bind(const Checkpoint& ckpt, const DeepseekV41Config& c,
                                                          const std::string& model_dir,
                                                          const ExpertPlacement* placement = nullptr);

  // Sets act_dtype BF16 on every linear weight that admits it (bf16, FP4, fp8 with blocks of a
  // multiple of 32 columns: admits_bf16_activations) that the layers and the head multiply through
  // Backend::linear (ModelOptions::activation_dtype): attention projections, compressors, the
  // indexer's projections, Engram's wkv, routed and shared experts, head. Not the embedding, the
  // routers, the Engram tables or the f32 hyper-connection matrices. fp8 weights whose scales are
  // all UE8M0 powers of two in range also get scales_fold (pow2_block_scales).
  void use_bf16_activations();

  // As DeepseekV4Weights::relay: the weights the backend reads faster in another layout (fp8 and
  // FP4 tile-major on AMX) copied into it, the stored pages dropped. After use_bf16_activations.
  // Returns the bytes copied.
  size_t relay(Backend& backend);

  // ModelOptions::lm_head_dtype: the head, where stored in bf16, f16 or f32, becomes fp8 with
  // 128 x 128 block scales or int8 with a scale per row and 128 columns (`to`: F8_E4M3 or I8_SM;
  // model/fp8_requantize.h). Before use_bf16_activations and relay. True where it was requantized;
  // an error names the tensor (a NaN or an infinity in it).
  Result<bool> requantize_head(const std::string& model_dir, DType to);

 private:
  std::deque<std::vector<uint8_t>> owned_;
  AlignedVector<uint8_t> requantized_head_;  // requantize_head_fp8's codes and scales
  std::deque<UninitBytes> relaid_;  // weights in the backend's layout (relay)
  // f on every linear weight use_bf16_activations names.
  void for_each_projection(const std::function<void(LinearWeight&)>& f);
};

}  // namespace deepinfer
