// DeepSeek-V4's KV compressor (also the lightning indexer's key compressor; reused by V4.1):
// one entry per `ratio` tokens. Token t contributes kv_t = wkv x_t and score_t = wgate x_t +
// ape[t % ratio], each [coff * dim]. Entry w pools, per channel c, softmax over its slots of
// score weighting kv: without overlap the slots are window w's tokens (channel c); with overlap
// (ratio 4, coff 2) window w-1's tokens in channel c and window w's in channel dim + c (window 0:
// only its own). Then the compressor's RMSNorm and RoPE at position w * ratio (by the caller).
// V4.1 has no position bias (ape empty) and also ratio 1, where an entry is its token's kv and
// there is no gate (wgate unbound, score unused).
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/ops.h"

namespace deepinfer {

struct CompressorWeights {
  int ratio = 0;
  int dim = 0;                // entry width (head_dim, or index_head_dim for the indexer)
  bool overlap = false;       // ratio == 4: two overlapping series
  LinearWeight wkv;           // [coff * dim, hidden]
  LinearWeight wgate;         // [coff * dim, hidden]; unbound at ratio 1
  std::vector<float> ape;     // [ratio, coff * dim] position bias of the scores, or empty (none)
  std::vector<float> norm;    // [dim]
  int coff() const { return overlap ? 2 : 1; }
};

// kv, score: [n, coff * dim] for rows x [n, ldx] at `positions` [n].
void compressor_token_inputs(Backend& backend, const CompressorWeights& w, const float* x, int64_t ldx, int64_t n,
                             const int32_t* positions, float* kv, float* score);

// Entry w from its slots' token inputs (before norm and RoPE): kv, score [n_tokens, coff * dim],
// the tokens of window w-1 (`n_prev` = ratio with overlap and w > 0, else 0) then of window w.
void compressor_pool(const CompressorWeights& w, const float* kv, const float* score, int n_prev, float* entry);

}  // namespace deepinfer
