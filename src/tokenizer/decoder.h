// Decoder: the "decoder" of tokenizer.json, which turns token strings back into text exactly as
// the library's decode does. Supported: Sequence, ByteLevel, Metaspace, ByteFallback, Fuse, Strip,
// Replace, BPEDecoder. Without a decoder, tokens are joined with spaces.
//
// Streaming: decode() can continue a text that earlier tokens began (`continuation`), so the
// incremental detokenizer decodes only a window of recent tokens: rules that apply to the first
// token of the text (Metaspace's leading space, Strip at the start of fused text) are then not
// applied. stream_local() tells whether that window decoding is exact for this decoder; it is
// not for rules that depend on the end of the text or on text across tokens (BPEDecoder's last
// suffix, Strip at the end of fused text, multi-character Replace after Fuse).
// Immutable after construction; decode() is thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/regex.h"

namespace deepinfer {

class Decoder {
 public:
  // `config` is the "decoder" value of tokenizer.json (null: join tokens with spaces).
  static Result<Decoder> FromJson(const nlohmann::json& config);

  // The text of `tokens`; `continuation`: they follow earlier tokens of the same text.
  Result<std::string> decode(std::vector<std::string> tokens, bool continuation) const;

  bool stream_local() const { return stream_local_; }
  // Whether byte tokens (<0xXX>) are joined into characters (ByteFallback): text cannot be cut
  // after such a token, since the bytes that follow may complete its character.
  bool has_byte_fallback() const { return has_byte_fallback_; }

 private:
  enum class Kind { kByteLevel, kMetaspace, kByteFallback, kFuse, kStrip, kReplace, kBpeSuffix };
  struct Step {
    Kind kind;
    std::string content;                   // Metaspace/Strip: the character; Replace: replacement;
                                           // BPEDecoder: the suffix
    bool metaspace_strips_first = false;   // Metaspace: prepend_scheme is not "never"
    size_t strip_start = 0, strip_stop = 0;
    std::shared_ptr<const Regex> pattern;  // Replace
    bool single_char_pattern = false;      // Replace: the pattern is one literal character
  };
  static Status add_steps(const nlohmann::json& config, const std::string& where,
                          std::vector<Step>& steps);

  std::vector<Step> steps_;
  bool none_ = true;  // no decoder at all
  bool stream_local_ = true;
  bool has_byte_fallback_ = false;
};

}  // namespace deepinfer
