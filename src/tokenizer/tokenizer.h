// Tokenizer: a checkpoint's Hugging Face tokenizer (tokenizer.json with a BPE model, plus
// tokenizer_config.json and generation_config.json), giving token for token the ids and text of
// the `tokenizers` library: added tokens are matched first, the text between them is normalized,
// pre-tokenized and run through BPE; decode maps ids to tokens and runs the decoder.
//
// Sharing: a Tokenizer is a handle to immutable state; copies are cheap and every method is
// const and thread-safe. Bad input (invalid UTF-8, unknown ids) gives a failed Result, never a
// crash.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace deepinfer {

class Tokenizer {
 public:
  // Reads DIR/tokenizer.json and DIR/tokenizer_config.json, and DIR/generation_config.json for
  // eos ids when present. tokenizer_config.json may be missing (no special token settings).
  static Result<Tokenizer> Load(const std::string& model_dir);
  // The same from file contents; an empty string stands for a missing config file.
  static Result<Tokenizer> FromJson(std::string_view tokenizer_json,
                                    std::string_view tokenizer_config_json = {},
                                    std::string_view generation_config_json = {});

  // Token ids of `text` (which must be valid UTF-8). With add_special_tokens, BOS/EOS are added
  // as tokenizer_config.json's add_bos_token/add_eos_token say when it has either flag, else as
  // tokenizer.json's post_processor says.
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_special_tokens) const;
  // Text of `ids`, as the library's decode; skip_special_tokens drops tokens whose content is a
  // special added token. An id with no token is an error.
  Result<std::string> decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  // Distinct tokens of the model vocabulary and the added tokens (the library's
  // get_vocab_size(with_added_tokens=True)).
  size_t vocab_size() const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::optional<std::string> id_to_token(int32_t id) const;
  // Whether `id` is a special added token (skipped by decode with skip_special_tokens).
  bool is_special_id(int32_t id) const;

  // tokenizer_config.json's special tokens (contents) and their ids when in the vocabulary.
  const std::optional<std::string>& bos_token() const;
  const std::optional<std::string>& eos_token() const;
  const std::optional<std::string>& pad_token() const;
  const std::optional<std::string>& unk_token() const;
  std::optional<int32_t> bos_token_id() const;
  std::optional<int32_t> eos_token_id() const;
  // Ids that end generation: generation_config.json's eos_token_id (one or a list) when present,
  // else the eos token's id; may be empty.
  std::vector<int32_t> eos_token_ids() const;
  std::optional<bool> add_bos_token() const;
  std::optional<bool> add_eos_token() const;
  // chat_template exactly as tokenizer_config.json gives it (string, list of named templates, or
  // null when absent).
  const nlohmann::json& chat_template() const;
  std::optional<uint64_t> model_max_length() const;

 private:
  struct Impl;
  friend class IncrementalDetokenizer;
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  // Decoding for the incremental detokenizer: `continuation` says earlier tokens precede `ids`.
  Result<std::string> decode_window(std::span<const int32_t> ids, bool skip_special_tokens,
                                    bool continuation) const;
  // The decoder's streaming properties (see Decoder::stream_local, has_byte_fallback).
  bool decoder_stream_local() const;
  bool decoder_has_byte_fallback() const;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace deepinfer
