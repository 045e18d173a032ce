// CausalLM: what the engine needs from a loaded model. The engine owns the KV cache memory and
// the batch; the model reads weights and computes. Implementations: deepseek/model.h.
//
// Thread safety: forward() is called from the engine thread only; it may use OpenMP inside.
// Determinism contract (batch invariance): the logits of a row depend only on that row's
// sequence (its tokens and positions, its tokens' provenance, and its cached KV), never on which
// other sequences share the step, how its prompt was chunked, whether it was preempted and
// recomputed, or whether its prefix came from the prefix cache.
//
// Provenance: a model may compute a token's state by one of two formulations according to where
// the token came from (ForwardBatch::prompt_rows): tokens that came in the request's prompt by the
// prefill formulation, tokens the model generated (sampled, recomputed after preemption, or
// speculative drafts) by the decode formulation. DeepSeek-V2/V3 do (MLA expanded to per-head K/V
// for prompt rows, absorbed for generated rows: model/deepseek/model.h); a model says so with
// kv_depends_on_provenance(), and the engine then files a cached block under a hash that
// includes how many of its tokens were generated, so a block holding generated tokens never
// serves as a prompt block (the next turn of a conversation computes the previous answer again,
// once, as prompt).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "core/status.h"
#include "model/eplb.h"
#include "model/forward_batch.h"

namespace deepinfer {

class ExpertGroup;  // model/expert_group.h
class ExpertLoad;   // model/expert_load.h

struct CausalLMInfo {
  std::string architecture;          // e.g. "DeepseekV3ForCausalLM"
  int vocab_size = 0;
  int n_layers = 0;                  // decoder layers (MTP layers excluded)
  int max_position_embeddings = 0;
  std::vector<int32_t> eos_token_ids;  // from generation_config.json (else config.json)
  int32_t bos_token_id = -1;         // -1: none
  size_t n_params = 0;               // parameters loaded
  size_t n_weight_bytes = 0;         // their bytes in stored precision
  DType activation_dtype = DType::F32;  // ModelOptions::activation_dtype as applied
  std::optional<DType> lm_head_requantized;  // ModelOptions::lm_head_dtype, where applied to a stored lm_head
  size_t n_relaid_bytes = 0;         // weights copied into the backend's layout at load (ModelOptions::relay_weights)
  // What else a cached token's bytes depend on, beyond the checkpoint and the activation dtype
  // (e.g. "prompt rows expanded" for DeepSeek-V2/V3 under the provenance rule); empty: nothing.
  // Two processes exchange cached KV only where this and activation_dtype agree.
  std::string kv_formulation;
};

// How DeepSeek-V2/V3 attend from prompt rows (the provenance rule above).
enum class PrefillAttention {
  kExpanded,  // MLA expanded to per-head K/V (~3.5x less arithmetic per query-key pair at V3 sizes)
  kAbsorbed,  // as generated rows: the model's KV then does not depend on provenance (for comparison)
};

// How a model is loaded, beyond what its folder says.
struct ModelOptions {
  // F32 (default): every product in f32. BF16 (opt-in): the inputs of the linear layers with bf16,
  // fp8 (e4m3, converted to bf16 exactly, each scale block's partial sum scaled) or FP4 weights
  // (projections, MLPs, experts, lm_head; not the MoE router, not the absorbed kv_b_proj) are
  // rounded to bf16, which AVX-512 BF16 and AMX CPUs multiply at 2x to 16x the f32 rate; with a
  // bf16 KV cache the attention scores are bf16 dot products too (queries rounded), and so are
  // DeepSeek-V4's indexer scores over a bf16 or fp8 cache (its query rounded, the cached keys'
  // codes as they are). Rounding an
  // fp8 layer's input to bf16 (8 significant bits) is far finer than what DeepSeek's own fp8
  // kernels do (inputs quantized to e4m3 per 128 values). Accuracy against f32 is measured in
  // tests/model/test_golden.py and bench/RESULTS.md; bitwise batch invariance holds either way.
  DType activation_dtype = DType::F32;
  // How DeepSeek-V2/V3 attend from prompt rows; other models ignore it.
  PrefillAttention prefill_attention = PrefillAttention::kExpanded;
  // Keep the state of the model's own draft predictor (DeepSeek-V2/V3's MTP layer, DeepSeek-V4's
  // MTP block) in extra cache kinds, so that draft() proposes speculative tokens. Off: the model
  // keeps only what its forward needs. DeepSeek-V2/V3 and V4: an error at load where the
  // checkpoint has none; models without such a predictor ignore it (can_draft() stays false).
  bool mtp_drafting = false;
  // Expert parallelism (model/expert_group.h): this process is one rank of the group, binds only
  // the routed experts its slice holds, and runs every MoE layer's routed experts across the
  // group (each forward, an empty one included, makes the same exchanges on every rank). Null:
  // one process holds every expert. Outlives the model. V2/V3, V4 and V4.1 (V4/V4.1 without EPLB).
  ExpertGroup* expert_group = nullptr;
  // With expert_group: redundant expert slots and rebalancing while serving (model/eplb.h), and
  // where this rank's expert loads are published (or null; outlives the model).
  EplbOptions eplb;
  ExpertLoad* expert_load = nullptr;
  // With expert_group: the rows' dtype on the wire, F32 (outputs bitwise those of one process) or
  // BF16 (half the bytes; accuracy in bench/RESULTS.md).
  DType expert_wire_dtype = DType::F32;
  // Hold the lm_head (DeepSeek-V2/V3's lm_head, V4's and V4.1's head) requantized at load
  // (model/fp8_requantize.h), where the checkpoint stores it in bf16, f16 or f32: one byte per weight
  // instead of two. On a checkpoint whose other linears are small or fp8 the lm_head is much of what
  // a batch-1 step reads (DeepSeek's fp8 checkpoints keep it in bf16).
  //  - F8_E4M3, with 128 x 128 block scales: each weight moves by at most 2^-4 of itself (or 2^-10 of
  //    its block's scale), so a logit by at most 2^-4 sum_j |h_j W_vj| plus that.
  //  - I8_SM, int8 with a scale per row and 128 columns: each weight moves by at most half its
  //    block's scale (amax / 127), about 4x less than fp8 in RMS (as ggml's Q8_0).
  // Measured agreement in bench/RESULTS.md. None (the default): the lm_head as stored. A stored fp8
  // or FP4 lm_head stays as it is.
  std::optional<DType> lm_head_dtype;
  // Let the backend relay the weights it reads faster in another layout (Backend::relay_weight:
  // fp8 and int8 codes tile-major where they run on weight tiles, AMX or AVX-512 BF16; FP4 on
  // AMX), copied out of the checkpoint's mapping at load (and, with expert parallelism, V2/V3's
  // routed experts as EPLB rebinds them); the outputs are bitwise the same either way.
  // DeepSeek-V2/V3, V4 and V4.1.
  bool relay_weights = true;
};

// One sequence's draft query (CausalLM::draft): its positions [0, n_ctx) are in the cache (block
// tables as in BatchSequence, every kind of kv_kinds), `token` is its token at position n_ctx
// (sampled, not computed yet), and n_drafts >= 1 tokens are wanted to follow it.
struct DraftQuery {
  int32_t n_ctx = 0;
  int32_t token = 0;
  int32_t n_drafts = 0;
  std::array<const int32_t*, kMaxKvKinds> block_tables{};
};

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  virtual const CausalLMInfo& info() const = 0;

  // The kinds of per-layer state the model keeps in the engine's cache, laid out for a cache
  // dtype (F32, BF16 or F8_E4M3; a model may store some state in its own formats) and a block
  // size in tokens. An error names what the model cannot hold that way (e.g. a block size its
  // compression ratios do not divide). forward() then gets a view of exactly these kinds.
  virtual Result<std::vector<KvKindSpec>> kv_kinds(DType cache_dtype, int block_size) const = 0;

  // Runs one step. For every row, writes its state into `kv` at its position (through its
  // sequence's block tables), then computes attention over positions [0, position] of that
  // sequence (what of them the model's attention reads). Writes logits of batch.logit_rows, in order, to `logits`: [logit_rows.size(), vocab_size].
  // Preconditions (checked): block tables cover n_ctx, positions < max_position_embeddings,
  // token ids < vocab_size (callers validate user input before it gets here).
  virtual void forward(const ForwardBatch& batch, const KvCacheView& kv, float* logits) = 0;

  // Whether a token's cached state depends on its provenance (see the contract above). False:
  // ForwardBatch::prompt_rows changes nothing.
  virtual bool kv_depends_on_provenance() const { return false; }

  // Whether draft() is available: the model was loaded with ModelOptions::mtp_drafting and its
  // forward keeps the predictor's state in its kinds.
  virtual bool can_draft() const { return false; }
  // Precondition: can_draft(). For each query in order, its n_drafts greedy draft tokens, one
  // after the other in `drafts` (sum of n_drafts). Reads the cache, never writes it; a query's
  // drafts depend only on its own sequence's cached state and token. Drafts are proposals: the
  // engine verifies them against forward().
  virtual void draft(std::span<const DraftQuery> queries, const KvCacheView& kv, int32_t* drafts) {
    (void)queries, (void)kv, (void)drafts;
    DI_CHECK(can_draft());
  }
};

}  // namespace deepinfer
