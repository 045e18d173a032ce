#include "tokenizer/incremental_detokenizer.h"

#include "tokenizer/utf8.h"

namespace deepinfer {
namespace {

bool is_byte_token(const std::string& token) {
  return token.size() == 6 && token.starts_with("<0x") && token.back() == '>';
}

}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(Tokenizer tokenizer, bool skip_special_tokens)
    : tokenizer_(std::move(tokenizer)),
      skip_special_tokens_(skip_special_tokens),
      stream_local_(tokenizer_.decoder_stream_local()),
      byte_fallback_(tokenizer_.decoder_has_byte_fallback()) {}

Result<std::string> IncrementalDetokenizer::push(int32_t id) {
  const std::optional<std::string> token = tokenizer_.id_to_token(id);
  if (!token) {
    return Status::Error("token id " + std::to_string(id) + " is outside the vocabulary (" +
                         std::to_string(tokenizer_.vocab_size()) + " tokens)");
  }
  // A skipped token does not exist for the decoder at all.
  if (skip_special_tokens_ && tokenizer_.is_special_id(id)) return std::string();
  pending_.push_back(id);
  if (!stream_local_ || (byte_fallback_ && is_byte_token(*token))) return std::string();
  DI_ASSIGN_OR_RETURN(std::string text,
                      tokenizer_.decode_window(pending_, skip_special_tokens_, continuation_));
  if (utf8::ends_with_replacement(text)) return std::string();
  pending_.clear();
  continuation_ = true;
  return text;
}

Result<std::string> IncrementalDetokenizer::finish() {
  DI_ASSIGN_OR_RETURN(std::string text,
                      tokenizer_.decode_window(pending_, skip_special_tokens_, continuation_));
  pending_.clear();
  continuation_ = false;
  return text;
}

}  // namespace deepinfer
