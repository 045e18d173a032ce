// DeepSeek-V4's lightning indexer (reused by V4.1): chooses, for each query, the index_topk
// compressed entries of a CSA layer that its attention reads. Queries q = wq_b(qr) per head,
// roped at the query's position (no norm); keys come from the indexer's own compressor
// (index_head_dim wide); per-head weights from weights_proj of the attention's normed input.
//   score(p, w) = sum_h weight_h * index_head_dim^-0.5 * n_heads^-0.5 * relu(q_h . key_w)
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.h"
#include "model/deepseek_v4/compressor.h"

namespace deepinfer {

struct IndexerWeights {
  int n_heads = 0;
  int head_dim = 0;
  int topk = 0;
  LinearWeight wq_b;          // [n_heads * head_dim, q_lora_rank]
  LinearWeight weights_proj;  // [n_heads, hidden]
  CompressorWeights compressor;  // V4: the indexer's own key compressor (V4.1 has none)
};

// scores [n_entries]: every entry's score for one query (inputs as indexer_select).
void indexer_scores(Backend& backend, const IndexerWeights& w, const float* q, const float* head_weights,
                    const float* keys, int n_entries, std::vector<float>& dots, std::vector<float>& scores);

// The entries [0, n_entries) a query reads, ascending: all of them when n_entries <= topk,
// else the topk best scores (ties to the lower index). q: [n_heads, head_dim] roped;
// head_weights: [n_heads]; keys: [n_entries, head_dim]. Returns the count written to `selected`.
// The q . key products run as one GEMM on the backend (keys as an f32 weight); `dots` and
// `scores` are scratch.
int indexer_select(Backend& backend, const IndexerWeights& w, const float* q, const float* head_weights,
                   const float* keys, int n_entries, int32_t* selected, std::vector<float>& dots,
                   std::vector<float>& scores);

// indexer_scores in bf16 products, by Backend::indexer_scores: keys[i] is entry i's key where it
// lies (key_dtype BF16, F4_E2M1 or F8_E4M3, IndexerScoresParams' rows), the query rounded to bf16, the same
// head weights times the same scale; `weights` is scratch.
void indexer_scores_bf16(Backend& backend, const IndexerWeights& w, const float* q, const float* head_weights,
                         const void* const* keys, DType key_dtype, int n_entries, std::vector<float>& weights,
                         std::vector<float>& scores);

// indexer_select on indexer_scores_bf16's scores (the same choice); `weights` and `scores` are scratch.
int indexer_select_bf16(Backend& backend, const IndexerWeights& w, const float* q, const float* head_weights,
                        const void* const* keys, DType key_dtype, int n_entries, int32_t* selected,
                        std::vector<float>& weights, std::vector<float>& scores);

}  // namespace deepinfer
