// Where DeepSeek-V4.1 keeps its state in the engine's cache (CausalLM::kv_kinds):
//
// Kind 0, "window" (lookback sliding_window - 1): a block holds, for its block_size tokens,
//   [layer][token] the token's K=V in every layer (window format).
// Kind 1, "compressed" (kept while the sequence lives), only KV source layers: for source s of
// ratio r, block_size / r entry slots per block; group g (tokens [g r, g r + r)) sits in the block
// of its last token, slot ((g + 1) r - 1) % block_size / r: the compressed K=V (entry format),
// then its indexer key (key format). Reuse and re-index layers store nothing: they read the
// latest source's entries.
// Last kind (1, or 2 after "compressed"), "inputs" (lookback = max(1 if a KV source compresses at
// ratio 2, engram_max_ngram_size - 1 if there are Engram layers)), only with either: a block
// holds, for its block_size tokens,
//   [token] int32 the token's Engram compressed id (Engram layers only: the n-gram look-back),
//   [ratio-2 source][token] f32 [2][head_dim]: the compressor's inputs wkv x and wgate x, so a
//                   group whose tokens span steps pools exactly the values of one step.
// Every byte is written by the step that computes its token.
//
// Formats: cache dtype F32 keeps every vector in f32 with no quantization (exact math). Any other
// cache dtype stores the published formats (kv_formats.h), each where its width is a multiple
// of its block (as the reference skips a fake-quant whose width is not): window fp8 per 32,
// compressed fp4 per 16 with e4m3 scales, indexer keys (and queries) fp4 per 32. At the
// published V4.1-Flash shapes the compressed kind costs 890 bytes per token.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "model/deepseek_v41/config.h"
#include "model/deepseek_v41/kv_formats.h"
#include "model/forward_batch.h"

namespace deepinfer {

struct V41KvLayout {
  int block_size = 0;
  int lookback = 0;         // the window kind's
  int inputs_lookback = 0;  // the inputs kind's
  int head_dim = 0, index_head_dim = 0;
  V41KvFormat window_format = V41KvFormat::kF32;
  V41KvFormat entry_format = V41KvFormat::kF32;
  V41KvFormat key_format = V41KvFormat::kF32;
  V41KvFormat query_format = V41KvFormat::kF32;  // indexer queries, fake-quantized, not stored
  size_t window_bytes = 0;  // one token's K=V in one layer
  size_t entry_bytes = 0;   // one compressed entry
  size_t key_bytes = 0;     // one indexer key
  size_t window_block_bytes = 0;
  size_t compressed_block_bytes = 0;  // 0: no KV source (no kind 1)
  size_t inputs_block_bytes = 0;
  int inputs_kind = -1;               // the inputs kind's index; -1: none
  int64_t ids_offset = -1;            // compressed ids in an inputs block; -1: no Engram
  std::vector<int64_t> group_offset;  // [layer] compressor inputs in an inputs block; -1: none
  std::vector<int64_t> source_offset; // [layer] this source's slots in a compressed block; -1: not a source
  std::vector<int> source_ratio;      // [layer]

  static Result<V41KvLayout> make(const DeepseekV41Config& c, DType cache_dtype, int block_size);
  std::vector<KvKindSpec> kinds() const;

  uint8_t* window_entry(const KvCacheView& kv, const BatchSequence& s, int layer, int32_t position) const;
  uint8_t* token_id(const KvCacheView& kv, const BatchSequence& s, int32_t position) const;       // int32
  uint8_t* group_inputs(const KvCacheView& kv, const BatchSequence& s, int layer, int32_t position) const;  // f32 [2][head_dim]
  // Entry then key of group g of KV source `layer`.
  uint8_t* compressed_entry(const KvCacheView& kv, const BatchSequence& s, int layer, int32_t group) const;
};

}  // namespace deepinfer
