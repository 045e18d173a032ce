// CausalLM: what the engine needs from a loaded model. The engine owns the KV cache memory and
// the batch; the model reads weights and computes. Implementations: deepseek/model.h.
//
// Thread safety: forward() is called from the engine thread only; it may use OpenMP inside.
// Determinism contract (batch invariance): the logits of a row depend only on that row's
// sequence (its tokens and positions, and its cached KV), never on which other sequences share
// the step, how its prompt was chunked, or whether its prefix came from the prefix cache.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/forward_batch.h"

namespace deepinfer {

struct CausalLMInfo {
  std::string architecture;          // e.g. "DeepseekV3ForCausalLM"
  int vocab_size = 0;
  int n_layers = 0;                  // layers that hold KV (MTP layers excluded)
  int max_position_embeddings = 0;
  int kv_lora_rank = 0;              // MLA latent width cached per token and layer
  int qk_rope_head_dim = 0;          // roped key part cached per token and layer
  std::vector<int32_t> eos_token_ids;  // from generation_config.json (else config.json)
  int32_t bos_token_id = -1;         // -1: none
  size_t n_params = 0;               // parameters loaded
  size_t n_weight_bytes = 0;         // their bytes in stored precision
  DType activation_dtype = DType::F32;  // ModelOptions::activation_dtype as applied
  std::string kv_note;               // what the model keeps per token beyond the sizes above, for the load log ("" if nothing)
};

// How a model is loaded, beyond what its folder says.
struct ModelOptions {
  // F32 (default): every product in f32. BF16 (opt-in): the inputs of the linear layers with bf16
  // weights (projections, MLPs, experts, lm_head; not the MoE router, not the absorbed kv_b_proj)
  // are rounded to bf16, which AVX-512 BF16 CPUs multiply at twice the f32 rate; with a bf16 KV
  // cache the attention scores are bf16 dot products too (queries rounded). Accuracy
  // against f32 is measured in bench/RESULTS.md; bitwise batch invariance holds either way.
  DType activation_dtype = DType::F32;
};

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  virtual const CausalLMInfo& info() const = 0;

  // Runs one step. For every row, writes its latent KV into `kv` at its position (through its
  // sequence's block table), then computes attention over positions [0, position] of that
  // sequence. Writes logits of batch.logit_rows, in order, to `logits`: [logit_rows.size(), vocab_size].
  // Preconditions (checked): block tables cover n_ctx, positions < max_position_embeddings,
  // token ids < vocab_size (callers validate user input before it gets here).
  virtual void forward(const ForwardBatch& batch, const KvCacheView& kv, float* logits) = 0;
};

}  // namespace deepinfer
