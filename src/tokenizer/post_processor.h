// PostProcessor: the special tokens that encode(text, add_special_tokens = true) puts around a
// single sequence, from the "post_processor" of tokenizer.json: TemplateProcessing (its "single"
// template), BertProcessing and RobertaProcessing ([cls] A [sep]), ByteLevel (none), Sequence.
// Immutable after construction.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <vector>

#include "core/status.h"

namespace deepinfer {

class PostProcessor {
 public:
  // `config` is the "post_processor" value of tokenizer.json (null: no special tokens).
  static Result<PostProcessor> FromJson(const nlohmann::json& config);
  // An explicit frame: `prefix` before the sequence and `suffix` after it.
  static PostProcessor Wrapping(std::vector<int32_t> prefix, std::vector<int32_t> suffix);

  // Wraps `ids` in the special tokens.
  void apply(std::vector<int32_t>& ids) const;

 private:
  struct Frame {
    std::vector<int32_t> prefix, suffix;
  };
  static Status add_frames(const nlohmann::json& config, const std::string& where,
                           std::vector<Frame>& frames);
  std::vector<Frame> frames_;  // applied in order, each around the result of the previous
};

}  // namespace deepinfer
