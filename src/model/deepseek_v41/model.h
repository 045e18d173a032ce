// DeepseekV41Model: DeepSeek-V4.1 (DeepseekV41ForCausalLM) text forward pass on a Backend in f32,
// as transformers' modeling_deepseek_v41.py (0a2080b4), wiring the V4 parts with V4.1's changes:
// - single-pass hyper-connections: each site mixes its input streams once (hc_mix); a sublayer's
//   input collapses the streams with the PREVIOUS site's pre (stream 0 before layer 0), and the
//   last FFN site's pre collapses the streams for the final norm and head;
// - Engram before the mixes of its layers (engram.h), hashed from the sequence's compressed ids;
// - attention in every layer over its own sliding window; KV source layers also compress (ratio
//   2: softmax-pooled pairs, ratio 1: every token) into entries that later layers reuse until the
//   next source, plus indexer keys; index sources score the latest source's keys and choose the
//   top-k entries that the following compressed layers read; the candidate source keeps the
//   top candidate blocks (the newest always) inside which later index sources score;
// - routed and shared experts clamped; router with gate_temp.
// State lives in the engine's cache as kv_layout.h lays it out, written before it is read, so a
// row depends only on its own sequence (batch invariance, chunked prefill, prefix caching).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/aligned_vector.h"
#include "kernels/ops.h"
#include "model/causal_lm.h"
#include "model/deepseek_v4/clamped_moe.h"
#include "model/deepseek_v4/hyper_connection.h"
#include "model/deepseek_v41/config.h"
#include "model/deepseek_v41/engram.h"
#include "model/deepseek_v41/engram_hash.h"
#include "model/deepseek_v41/kv_layout.h"
#include "model/deepseek_v41/weights.h"
#include "model/expert_parallel_moe.h"
#include "model/safetensors.h"

namespace deepinfer {

class DeepseekV41Model final : public CausalLM {
 public:
  // With options.expert_group, this rank binds only its slice of every layer's routed experts
  // and runs the MoE layers across the group (clamped_moe_expert_parallel): outputs are bitwise
  // one process's. Not with EPLB (an error).
  static Result<std::unique_ptr<DeepseekV41Model>> Load(const std::string& model_dir, const ModelOptions& options,
                                                         Backend& backend);

  const CausalLMInfo& info() const override { return info_; }
  Result<std::vector<KvKindSpec>> kv_kinds(DType cache_dtype, int block_size) const override;
  void forward(const ForwardBatch& batch, const KvCacheView& kv, float* logits) override;

  const DeepseekV41Config& config() const { return config_; }
  const DeepseekV41Weights& weights() const { return *weights_; }
  // What loading set aside (vision tower, DSpark blocks): one line for the load log.
  const std::string& load_note() const { return load_note_; }

 private:
  DeepseekV41Model(DeepseekV41Config c, Checkpoint ckpt, std::unique_ptr<DeepseekV41Weights> w, Backend& backend);

  // xn: the sublayer's normed input [n, hidden]; out: [n, hidden].
  void attention(int layer, const ForwardBatch& b, const KvCacheView& kv, const float* xn, float* out);
  // KV source: stores each row's compressor inputs, then the entries and keys of the groups
  // that rows complete; then gathers every sequence's keys (s_.keys, or where cached s_.key_rows).
  void compress(int layer, const ForwardBatch& b, const KvCacheView& kv, const float* xn);
  // Index source: each row's selected entries of the latest source (s_.selected).
  void index(int layer, const ForwardBatch& b, const float* xn, const float* qr);
  // Under bf16 dots, for sequence si of b: its rows' window entries and the compressed entries
  // they select, loaded once as bf16 rows of ld (s_.key_table), which its rows copy instead of
  // loading each entry again.
  void key_table(int layer, const ForwardBatch& b, const KvCacheView& kv, size_t si, int ld);
  void ffn(int layer, const ForwardBatch& b, const float* xn, float* out);
  void engram(int layer, const ForwardBatch& b, const KvCacheView& kv, float* streams);

  DeepseekV41Config config_;
  Checkpoint ckpt_;  // owns the mappings the weights point into
  std::unique_ptr<DeepseekV41Weights> weights_;
  Backend& backend_;
  HyperConnectionDims hc_;
  std::vector<float> window_inv_freq_;    // [rope / 2] rope_theta, window-only layers
  std::vector<float> compress_inv_freq_;  // [rope / 2] compress_rope_theta with YaRN
  std::vector<int32_t> compressed_ids_;   // [vocab] Engram compressed id of each token
  std::vector<EngramLayerHash> engram_hashes_;
  CausalLMInfo info_;
  std::string load_note_;
  std::unique_ptr<ExpertParallelMoe> ep_;  // with ModelOptions::expert_group: routed experts across ranks
  V41KvLayout layout_;  // of the view being run

  struct SeqKeyTable {  // one sequence's keys in bf16 (key_table)
    int32_t window_first = 0;
    AlignedVector<uint16_t> window;   // [positions window_first.., ld]
    size_t n_entries = 0;             // 0: the rows load their compressed entries themselves
    AlignedVector<uint16_t> entries;  // [n_entries, ld]: entry_ids' entries
    std::vector<int32_t> entry_ids;   // compressed entries the rows select, in first-use order
    std::vector<int32_t> entry_row;   // [visible entries]: each one's row in entries, or -1
  };

  struct Scratch {  // reused across steps; sized on demand
    AlignedVector<float> streams, y, xn, out, pre, pre_next, post, comb, mixes, qr, q, kv, o, og, logits,
        expert_weights, ckv, cscore, latent, ikey, iq, iw;
    std::vector<float> keys;                       // per sequence: the latest source's indexer keys [n_ctx / r, index_head_dim]
    std::vector<size_t> key_offset;                // [n_seqs + 1] into keys, or key_rows in keys
    std::vector<const void*> key_rows;             // instead, where e2m1 keys score in bf16: each key where cached
    std::vector<std::vector<int32_t>> selected;    // [n_rows] entries the compressed layers read
    std::vector<std::vector<int32_t>> candidates;  // [n_rows] entries of the candidate blocks; empty: all
    SeqKeyTable key_table;
    std::vector<int64_t> plain_rows;               // rows attended without a key table
    std::vector<int32_t> expert_ids, row_seq, neg_positions, group_rows, group_pos;
    std::vector<int64_t> engram_rows;
    ClampedMoeScratch moe;
    EngramScratch engram;
  } s_;
};

}  // namespace deepinfer
