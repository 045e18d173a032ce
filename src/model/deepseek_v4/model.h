// DeepseekV4Model: DeepSeek-V4 (DeepseekV4ForCausalLM) forward pass on a Backend in f32, with
// weights dequantized in the kernels, wiring the parts of this folder: hyper-connections around
// every sublayer, attention with sinks over a sliding window plus compressed entries (all of
// them at HCA layers, the indexer's top-k at CSA layers), grouped low-rank output, and the
// sqrtsoftplus / hash-routed MoE with clamped routed experts. Its state lives in the engine's
// cache kinds as cache_slots.h lays them out (a window of per-token state, compressed entries),
// written before it is read, so a row's result depends only on its own sequence (batch
// invariance, chunking, prefix caching).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/aligned_vector.h"
#include "kernels/ops.h"
#include "model/causal_lm.h"
#include "model/deepseek_v4/cache_slots.h"
#include "model/deepseek_v4/clamped_moe.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v4/weights.h"
#include "model/expert_parallel_moe.h"
#include "model/safetensors.h"

namespace deepinfer {

class V4MtpBlock;

class DeepseekV4Model final : public CausalLM {
 public:
  // With options.expert_group, this rank binds only its slice of every main layer's routed
  // experts (only their pages are read) and runs the MoE layers across the group
  // (expert_parallel_moe.h): rows are routed here (the hash-routed layers by token id), the
  // clamped experts run on the rank holding them, and the combine keeps clamped_moe's order, so
  // outputs are bitwise one process's. Not with EPLB or MTP drafting (errors).
  // With options.mtp_drafting, the MTP block mtp.0 drafts (an error if the checkpoint has none):
  // kv_kinds then has the MTP kinds (cache_slots.h), forward writes them, and draft() reads them.
  static Result<std::unique_ptr<DeepseekV4Model>> Load(const std::string& model_dir, const ModelOptions& options,
                                                        Backend& backend);
  ~DeepseekV4Model() override;

  const CausalLMInfo& info() const override { return info_; }
  Result<std::vector<KvKindSpec>> kv_kinds(DType cache_dtype, int block_size) const override;
  void forward(const ForwardBatch& batch, const KvCacheView& kv, float* logits) override;
  bool can_draft() const override { return mtp_ != nullptr; }
  void draft(std::span<const DraftQuery> queries, const KvCacheView& kv, int32_t* drafts) override;
  // forward, also copying the hc_mult residual streams of the rows listed (each < n_rows) as the
  // last block leaves them, before hc_head and the final norm (what the MTP block reads), to
  // streams_out [stream_rows.size(), hc_mult, hidden].
  void forward_with_streams(const ForwardBatch& batch, const KvCacheView& kv, float* logits,
                            const std::vector<int32_t>& stream_rows, float* streams_out);

  const DeepseekV4Config& config() const { return config_; }
  const DeepseekV4Weights& weights() const { return *weights_; }
  Backend& backend() const { return backend_; }
  Result<V4CacheSlots> cache_slots(DType cache_dtype, int block_size) const;

 private:
  DeepseekV4Model(DeepseekV4Config c, Checkpoint ckpt, std::unique_ptr<DeepseekV4Weights> w, Backend& backend);

  // xn: the sublayer's normed input [n, hidden]; out: [n, hidden].
  void attention(int layer, const ForwardBatch& b, const KvCacheView& kv, const float* xn, float* out);
  void ffn(int layer, const ForwardBatch& b, const float* xn, float* out);
  // Each row's streams (the last block's output) [n, hc_mult, hidden] into the MTP streams kind,
  // and for rows at positions >= 1 the MTP block's K=V entry from (h_{p-1}, s[p]).
  void write_mtp_state(const ForwardBatch& b, const KvCacheView& kv, const float* streams);
  // Writes each row's compressor inputs (the attention's, or with index_keys the indexer's), then
  // the entries (or indexer keys) of the groups that rows complete.
  void compress(const CompressorWeights& w, int layer, bool index_keys, const ForwardBatch& b, const KvCacheView& kv,
                const float* xn);

  DeepseekV4Config config_;
  Checkpoint ckpt_;  // owns the mappings the weights point into
  std::unique_ptr<DeepseekV4Weights> weights_;
  Backend& backend_;
  std::vector<int> layer_ratios_;  // compress_ratios without the MTP block's
  // The layout of the cache forward/draft were last given, laid out again only when its dtype or
  // block size changes (a model serves one engine's cache; tests and benchmarks pass others).
  void use_cache_layout(const KvCacheView& kv);
  V4CacheSlots slots_;
  DType slots_dtype_ = DType::F32;
  HyperConnectionDims hc_;
  std::vector<float> window_inv_freq_;    // [rope / 2] rope_theta, sliding-only layers
  std::vector<float> compress_inv_freq_;  // [rope / 2] compress_rope_theta with YaRN
  CausalLMInfo info_;
  std::unique_ptr<V4MtpBlock> mtp_;  // drafting only (ModelOptions::mtp_drafting)
  std::unique_ptr<ExpertParallelMoe> ep_;  // with ModelOptions::expert_group: routed experts across ranks

  struct Scratch {  // reused across steps; sized on demand
    AlignedVector<float> streams, y, xn, out, post, comb, mixes, qr, q, kv, o, og, ckv, cscore, iq, iw, logits,
        expert_weights;
    std::vector<float> index_keys;          // per sequence: its indexer keys [n_ctx / 4, index_head_dim]
    std::vector<const void*> index_key_rows;  // where they are scored in bf16: each key where cached
    std::vector<size_t> index_key_offset;   // [n_seqs + 1] into index_keys
    std::vector<int32_t> expert_ids, row_seq, neg_positions;
    std::vector<float> mtp_h, mtp_kv;         // write_mtp_state: h_{p-1} and K=V per row
    std::vector<int32_t> mtp_ids, mtp_positions, mtp_rows;
    ClampedMoeScratch moe;
  } s_;
};

}  // namespace deepinfer
