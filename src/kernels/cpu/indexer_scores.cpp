// Indexer scores: the keys in one span per OpenMP thread (one span unless there is enough work,
// or when the call is already inside a parallel region: the models score their rows in parallel),
// each by the level's KernelTable::indexer_score_block, which lays the query out once per span and
// whose per-key operations no split changes.
#include "kernels/cpu/indexer_scores.h"

#include <omp.h>

#include <algorithm>

#include "core/check.h"
#include "kernels/cpu/kernel_table.h"

namespace deepinfer::cpu {

void indexer_scores(const IndexerScoresParams& p) {
  DI_CHECK(p.q != nullptr && p.head_weights != nullptr && p.scores != nullptr && (p.keys != nullptr || p.n_keys == 0));
  DI_CHECK_MSG(p.n_heads > 0 && p.dim > 0 && p.n_keys >= 0, "indexer scores need heads and a dimension");
  DI_CHECK_MSG(p.key_dtype == DType::BF16 || (p.key_dtype == DType::F4_E2M1 && p.dim % 32 == 0) ||
                   (p.key_dtype == DType::F8_E4M3 && p.dim <= 128),
               "indexer keys are bf16, FP4 with a multiple of 32 dimensions, or fp8 with one scale (128 dimensions at most)");
  const KernelTable& k = kernels();
  // Worth the threads' start-up (a few microseconds) from a few hundred thousand products on.
  const bool threads = !omp_in_parallel() && p.n_keys * p.n_heads * p.dim >= (int64_t(1) << 18);
  const int64_t n_spans = threads ? omp_get_max_threads() : 1, per_span = (p.n_keys + n_spans - 1) / n_spans;
#pragma omp parallel for schedule(static) if (threads && n_spans > 1)
  for (int64_t s = 0; s < n_spans; ++s)
    k.indexer_score_block(p, std::min(p.n_keys, s * per_span), std::min(p.n_keys, (s + 1) * per_span));
}

}  // namespace deepinfer::cpu
