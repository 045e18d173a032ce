// CPU lightning-indexer scores with bf16 keys (see kernels/ops.h's IndexerScoresParams).
#pragma once

#include "kernels/ops.h"

namespace deepinfer::cpu {
void indexer_scores(const IndexerScoresParams& p);
}  // namespace deepinfer::cpu
