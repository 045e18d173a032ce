// Engram hashing of DeepSeek-V4.1 (the reference's build_compressed_token_map and n-gram hash):
//
// Token ids become compressed ids through the tokenizer: each token's text (its decode alone,
// special tokens kept) is normalized by NFKC, NFD, dropping combining marks (category M, as the
// tokenizers library's StripAccents), lowercasing,
// runs of [ \t\r\n] -> " ", then stripping surrounding whitespace except that a text that is
// exactly " " stays " "; the key is that normalized text, or the text itself when it normalizes
// to "", or the raw vocabulary token when the decode contains U+FFFD. Compressed ids number the
// distinct keys in order of first appearance over ids 0, 1, ...
//
// Per engram layer l (config layer id L), with N = engram_max_ngram_size and H = engram_n_heads:
//   multipliers[i] = 2 * default_rng(10007 * L).integers(0, (INT64_MAX // C) // 2) + 1, i < N,
//                    C = the compressed vocabulary size (one draw each, in order)
//   primes[n - 2][h]: the primes >= engram_vocab_size in increasing order, never reused across
//                    heads, n-gram sizes or layers (layers in engram_layer_ids order)
//   row(n, h) = offset(n, h) + (XOR_{i < n} tok_i * multipliers[i]) mod primes[n - 2][h], where
//   tok_0 is the current token's compressed id, tok_i the one i positions back (the pad id's
//   compressed id before position 0), and offset(n, h) the sum of the primes before (n, h) in
//   (n, h) order. The layer's table has sum(primes) rows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace deepinfer {

// token_texts[id]: decode([id]); raw_tokens[id]: the vocabulary token. Returns [vocab] compressed ids.
std::vector<int32_t> engram_compressed_ids(const std::vector<std::string>& token_texts,
                                           const std::vector<std::string>& raw_tokens, int32_t* n_compressed);

// Both lists for the tokenizer of DIR (tokenizer.json: WordLevel without a decoder, whose decode
// of one id is its token, or any model the project's Tokenizer decodes), for ids [0, vocab_size).
Status engram_token_texts(const std::string& model_dir, int vocab_size, std::vector<std::string>& token_texts,
                          std::vector<std::string>& raw_tokens);

struct EngramLayerHash {
  std::vector<int64_t> multipliers;        // [N]
  std::vector<std::vector<int64_t>> primes;  // [N - 1][H]
  std::vector<std::vector<int64_t>> offsets; // [N - 1][H]
  int64_t n_rows = 0;                        // sum of the primes

  // Table rows of one position: out[(n - 2) * H + h] for n = 2..N, h < H. ids[i] = tok_i.
  void rows(const int32_t* ids, int64_t* out) const;
};

// One entry per engram layer, in engram_layer_ids order.
Result<std::vector<EngramLayerHash>> engram_layer_hashes(const std::vector<int>& engram_layer_ids, int max_ngram_size,
                                                         int n_heads, int64_t engram_vocab_size,
                                                         int64_t compressed_vocab_size);

}  // namespace deepinfer
