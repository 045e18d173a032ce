#include "tokenizer/tokenizer.h"

#include <filesystem>

#include "core/mapped_file.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer_config.h"
#include "tokenizer/utf8.h"

namespace deepinfer {

struct Tokenizer::Impl {
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  BpeModel model;
  AddedVocabulary added;
  Decoder decoder;
  PostProcessor post_processor;
  TokenizerConfig config;
  size_t vocab_size = 0;

  // Token string of `id`: an added token first, then the model's.
  const std::string* token_of(int32_t id) const {
    if (const AddedToken* t = added.find(id)) return &t->content;
    return model.id_to_token(id);
  }
};

namespace {

using json = nlohmann::json;

Result<std::string> read_optional(const std::filesystem::path& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) return std::string();
  return read_text_file(path.string());
}

// Per-thread buffers of encode, reused across calls.
struct EncodeScratch {
  std::vector<AddedVocabulary::Segment> raw_segments, normalized_segments;
  std::string normalized;
  PreTokenizer::Pieces pieces;
};

}  // namespace

Result<Tokenizer> Tokenizer::FromJson(std::string_view tokenizer_json,
                                      std::string_view tokenizer_config_json,
                                      std::string_view generation_config_json) {
  const json root = json::parse(tokenizer_json, nullptr, false);
  if (root.is_discarded() || !root.is_object()) return Status::Error("tokenizer.json is not a JSON object");
  auto field = [&](const char* key) -> const json& {
    static const json null_value;
    auto it = root.find(key);
    return it == root.end() ? null_value : *it;
  };
  auto in_file = [](const Status& s) { return Status::Error("tokenizer.json: " + s.message()); };
  auto impl = std::make_shared<Impl>();
  auto normalizer = Normalizer::FromJson(field("normalizer"));
  if (!normalizer.ok()) return in_file(normalizer.status());
  impl->normalizer = std::move(normalizer).value();
  auto pre_tokenizer = PreTokenizer::FromJson(field("pre_tokenizer"));
  if (!pre_tokenizer.ok()) return in_file(pre_tokenizer.status());
  impl->pre_tokenizer = std::move(pre_tokenizer).value();
  if (field("model").is_null()) return Status::Error("tokenizer.json: 'model' is missing");
  auto model = BpeModel::FromJson(field("model"));
  if (!model.ok()) return in_file(model.status());
  impl->model = std::move(model).value();
  auto added = AddedVocabulary::FromJson(field("added_tokens"), impl->model, impl->normalizer);
  if (!added.ok()) return in_file(added.status());
  impl->added = std::move(added).value();
  auto decoder = Decoder::FromJson(field("decoder"));
  if (!decoder.ok()) return in_file(decoder.status());
  impl->decoder = std::move(decoder).value();
  DI_ASSIGN_OR_RETURN(impl->config, TokenizerConfig::FromJson(tokenizer_config_json, generation_config_json));
  impl->vocab_size = impl->model.size() + impl->added.count_not_in(impl->model);

  const Tokenizer self{impl};
  const TokenizerConfig& c = impl->config;
  if (c.add_bos_token || c.add_eos_token) {
    // transformers' Llama-style tokenizers: the flags of tokenizer_config.json decide.
    std::vector<int32_t> prefix, suffix;
    if (c.add_bos_token.value_or(false)) {
      auto id = self.bos_token_id();
      if (!id) return Status::Error("tokenizer_config.json: add_bos_token is set but bos_token is not in the vocabulary");
      prefix.push_back(*id);
    }
    if (c.add_eos_token.value_or(false)) {
      auto id = self.eos_token_id();
      if (!id) return Status::Error("tokenizer_config.json: add_eos_token is set but eos_token is not in the vocabulary");
      suffix.push_back(*id);
    }
    impl->post_processor = PostProcessor::Wrapping(std::move(prefix), std::move(suffix));
  } else {
    auto post = PostProcessor::FromJson(field("post_processor"));
    if (!post.ok()) return in_file(post.status());
    impl->post_processor = std::move(post).value();
  }
  return self;
}

Result<Tokenizer> Tokenizer::Load(const std::string& model_dir) {
  const std::filesystem::path dir(model_dir);
  DI_ASSIGN_OR_RETURN(std::string tokenizer_json, read_text_file((dir / "tokenizer.json").string()));
  DI_ASSIGN_OR_RETURN(std::string config_json, read_optional(dir / "tokenizer_config.json"));
  DI_ASSIGN_OR_RETURN(std::string generation_json, read_optional(dir / "generation_config.json"));
  auto tokenizer = FromJson(tokenizer_json, config_json, generation_json);
  if (!tokenizer.ok()) return Status::Error(model_dir + ": " + tokenizer.status().message());
  return tokenizer;
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (const size_t bad = utf8::find_invalid(text); bad != std::string_view::npos) {
    return Status::Error("input text is not valid UTF-8 (byte offset " + std::to_string(bad) + ")");
  }
  const Impl& m = *impl_;
  thread_local EncodeScratch scratch;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);

  auto run_model = [&](std::string_view stretch, bool at_text_start) -> Status {
    DI_RETURN_IF_ERROR(m.pre_tokenizer.split(stretch, at_text_start, scratch.pieces));
    for (const PreTokenizer::Piece& piece : scratch.pieces.pieces) {
      m.model.tokenize(piece.text, scratch.pieces.byte_level, ids);
    }
    return Status::Ok();
  };

  scratch.raw_segments.clear();
  m.added.split(text, /*normalized=*/false, scratch.raw_segments);
  for (const AddedVocabulary::Segment& raw : scratch.raw_segments) {
    if (raw.id >= 0) {
      ids.push_back(raw.id);
      continue;
    }
    if (raw.end <= raw.start) continue;
    std::string_view stretch = text.substr(raw.start, raw.end - raw.start);
    const bool at_text_start = raw.start == 0;
    if (!m.normalizer.empty()) {
      scratch.normalized.assign(stretch);
      DI_RETURN_IF_ERROR(m.normalizer.apply(scratch.normalized));
      stretch = scratch.normalized;
    }
    scratch.normalized_segments.clear();
    m.added.split(stretch, /*normalized=*/true, scratch.normalized_segments);
    for (const AddedVocabulary::Segment& seg : scratch.normalized_segments) {
      if (seg.id >= 0) {
        ids.push_back(seg.id);
      } else if (seg.end > seg.start) {
        DI_RETURN_IF_ERROR(run_model(stretch.substr(seg.start, seg.end - seg.start),
                                     at_text_start && seg.start == 0));
      }
    }
  }
  if (add_special_tokens) m.post_processor.apply(ids);
  return ids;
}

Result<std::string> Tokenizer::decode_window(std::span<const int32_t> ids, bool skip_special_tokens,
                                             bool continuation) const {
  const Impl& m = *impl_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    const std::string* token = m.token_of(id);
    if (token == nullptr) {
      return Status::Error("token id " + std::to_string(id) + " is outside the vocabulary (" +
                           std::to_string(m.vocab_size) + " tokens)");
    }
    if (skip_special_tokens && m.added.is_special(*token)) continue;
    tokens.push_back(*token);
  }
  return m.decoder.decode(std::move(tokens), continuation);
}

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return decode_window(ids, skip_special_tokens, /*continuation=*/false);
}

bool Tokenizer::decoder_stream_local() const { return impl_->decoder.stream_local(); }
bool Tokenizer::decoder_has_byte_fallback() const { return impl_->decoder.has_byte_fallback(); }

size_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto id = impl_->added.token_to_id(token)) return id;
  return impl_->model.token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  const std::string* token = impl_->token_of(id);
  if (token == nullptr) return std::nullopt;
  return *token;
}

bool Tokenizer::is_special_id(int32_t id) const {
  const std::string* token = impl_->token_of(id);
  return token != nullptr && impl_->added.is_special(*token);
}

const std::optional<std::string>& Tokenizer::bos_token() const { return impl_->config.bos_token; }
const std::optional<std::string>& Tokenizer::eos_token() const { return impl_->config.eos_token; }
const std::optional<std::string>& Tokenizer::pad_token() const { return impl_->config.pad_token; }
const std::optional<std::string>& Tokenizer::unk_token() const { return impl_->config.unk_token; }

std::optional<int32_t> Tokenizer::bos_token_id() const {
  return bos_token() ? token_to_id(*bos_token()) : std::nullopt;
}

std::optional<int32_t> Tokenizer::eos_token_id() const {
  return eos_token() ? token_to_id(*eos_token()) : std::nullopt;
}

std::vector<int32_t> Tokenizer::eos_token_ids() const {
  if (!impl_->config.generation_eos_token_ids.empty()) return impl_->config.generation_eos_token_ids;
  if (auto id = eos_token_id()) return {*id};
  return {};
}

std::optional<bool> Tokenizer::add_bos_token() const { return impl_->config.add_bos_token; }
std::optional<bool> Tokenizer::add_eos_token() const { return impl_->config.add_eos_token; }
const nlohmann::json& Tokenizer::chat_template() const { return impl_->config.chat_template; }
std::optional<uint64_t> Tokenizer::model_max_length() const { return impl_->config.model_max_length; }

}  // namespace deepinfer
