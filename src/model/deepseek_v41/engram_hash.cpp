#include "model/deepseek_v41/engram_hash.h"

#include <filesystem>
#include <limits>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "model/deepseek_v41/numpy_rng.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_normalization.h"
#include "tokenizer/unicode_tables.h"
#include "tokenizer/utf8.h"

namespace deepinfer {
namespace {

constexpr char32_t kSentinel = 0xE000;  // keeps a lone " " through the strip

// NFKC, NFD, drop marks (M: Mn, Mc, Me, as the library's StripAccents), lowercase, [ \t\r\n]+ -> " ", "^ $" -> sentinel, strip, sentinel -> " ".
std::string normalize_token(std::string text) {
  static const std::vector<unicode::CodePointRange> marks = *unicode::category("M");
  unicode::normalize(text, unicode::NormalForm::kNfkc);
  unicode::normalize(text, unicode::NormalForm::kNfd);
  std::string folded;
  for (size_t i = 0; i < text.size();) {
    const char32_t c = utf8::next_code_point(text, i);
    if (unicode::contains(marks, c)) continue;
    if (const char* lower = unicode::lowercase(c)) folded += lower;
    else utf8::append_code_point(folded, c);
  }
  auto ascii_space = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n'; };
  std::string spaced;
  for (size_t i = 0; i < folded.size(); ++i) {
    if (!ascii_space(folded[i])) spaced += folded[i];
    else if (i == 0 || !ascii_space(folded[i - 1])) spaced += ' ';
  }
  if (spaced == " ") {
    spaced.clear();
    utf8::append_code_point(spaced, kSentinel);
  }
  size_t begin = 0, end = spaced.size();
  while (begin < end) {
    size_t next = begin;
    if (!utf8::is_white_space(utf8::next_code_point(spaced, next))) break;
    begin = next;
  }
  while (end > begin) {
    size_t prev = end;
    if (!utf8::is_white_space(utf8::previous_code_point(spaced, prev))) break;
    end = prev;
  }
  const std::string stripped = spaced.substr(begin, end - begin);
  std::string out;
  for (size_t i = 0; i < stripped.size();) {
    const char32_t c = utf8::next_code_point(stripped, i);
    utf8::append_code_point(out, c == kSentinel ? U' ' : c);
  }
  return out;
}

bool is_prime(int64_t v) {
  if (v < 2) return false;
  for (int64_t d = 2; d * d <= v; ++d)
    if (v % d == 0) return false;
  return true;
}

}  // namespace

std::vector<int32_t> engram_compressed_ids(const std::vector<std::string>& token_texts,
                                           const std::vector<std::string>& raw_tokens, int32_t* n_compressed) {
  std::unordered_map<std::string, int32_t> ids;
  std::vector<int32_t> out(token_texts.size());
  for (size_t t = 0; t < token_texts.size(); ++t) {
    std::string key;
    if (token_texts[t].find(utf8::kReplacementChar) != std::string::npos) {
      key = raw_tokens[t];
    } else {
      key = normalize_token(token_texts[t]);
      if (key.empty()) key = token_texts[t];
    }
    auto [it, inserted] = ids.emplace(std::move(key), int32_t(ids.size()));
    out[t] = it->second;
  }
  *n_compressed = int32_t(ids.size());
  return out;
}

Status engram_token_texts(const std::string& model_dir, int vocab_size, std::vector<std::string>& token_texts,
                          std::vector<std::string>& raw_tokens) {
  const std::string path = (std::filesystem::path(model_dir) / "tokenizer.json").string();
  DI_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::Error(path + ": not a valid JSON object");
  token_texts.assign(size_t(vocab_size), std::string());
  raw_tokens.assign(size_t(vocab_size), std::string());
  std::vector<bool> seen(size_t(vocab_size), false);
  const auto model = j.find("model");
  const bool word_level = model != j.end() && model->is_object() && model->value("type", "") == "WordLevel";
  if (word_level) {  // decode of one id is its token (no decoder)
    if (j.contains("decoder") && !j["decoder"].is_null())
      return Status::Error(path + ": a WordLevel tokenizer with a decoder is not supported for Engram");
    auto put = [&](const std::string& token, int64_t id) {
      if (id < 0 || id >= vocab_size) return;
      token_texts[size_t(id)] = raw_tokens[size_t(id)] = token;
      seen[size_t(id)] = true;
    };
    const auto vocab = model->find("vocab");
    if (vocab == model->end() || !vocab->is_object()) return Status::Error(path + ": model.vocab must be an object");
    for (const auto& [token, id] : vocab->items())
      if (id.is_number_integer()) put(token, id.get<int64_t>());
    if (const auto added = j.find("added_tokens"); added != j.end() && added->is_array())
      for (const auto& a : *added)
        if (a.is_object() && a.contains("content") && a["content"].is_string() && a.contains("id") && a["id"].is_number_integer())
          put(a["content"].get<std::string>(), a["id"].get<int64_t>());
  } else {
    DI_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::Load(model_dir));
    for (int32_t id = 0; id < vocab_size; ++id) {
      const std::optional<std::string> raw = tok.id_to_token(id);
      if (!raw) continue;
      const int32_t one[1] = {id};
      DI_ASSIGN_OR_RETURN(token_texts[size_t(id)], tok.decode(one, false));
      raw_tokens[size_t(id)] = *raw;
      seen[size_t(id)] = true;
    }
  }
  for (int id = 0; id < vocab_size; ++id)
    if (!seen[size_t(id)])
      return Status::Error(path + ": token id " + std::to_string(id) + " is below vocab_size but has no token");
  return Status::Ok();
}

void EngramLayerHash::rows(const int32_t* ids, int64_t* out) const {
  const int N = int(multipliers.size());
  // Ids below C and multipliers below INT64_MAX / C never overflow, so unsigned arithmetic gives
  // the reference's int64 values; on other ids (a cache holding garbage) rows stay in the table.
  uint64_t h = 0;
  for (int i = 0; i < N; ++i) {
    h ^= uint64_t(uint32_t(ids[i])) * uint64_t(multipliers[size_t(i)]);
    if (i == 0) continue;
    const std::vector<int64_t>& p = primes[size_t(i - 1)];
    for (size_t k = 0; k < p.size(); ++k) *out++ = offsets[size_t(i - 1)][k] + int64_t(h % uint64_t(p[k]));
  }
}

Result<std::vector<EngramLayerHash>> engram_layer_hashes(const std::vector<int>& engram_layer_ids, int max_ngram_size,
                                                         int n_heads, int64_t engram_vocab_size,
                                                         int64_t compressed_vocab_size) {
  std::vector<EngramLayerHash> out;
  const int64_t high = (std::numeric_limits<int64_t>::max() / compressed_vocab_size) / 2;
  int64_t candidate = engram_vocab_size;
  for (int layer : engram_layer_ids) {
    EngramLayerHash e;
    NumpyRng rng(uint64_t(10007) * uint64_t(layer));
    for (int i = 0; i < max_ngram_size; ++i) {
      DI_ASSIGN_OR_RETURN(int64_t v, rng.integers(0, high));
      e.multipliers.push_back(2 * v + 1);
    }
    for (int n = 2; n <= max_ngram_size; ++n) {
      std::vector<int64_t>& p = e.primes.emplace_back();
      std::vector<int64_t>& o = e.offsets.emplace_back();
      for (int h = 0; h < n_heads; ++h) {
        while (!is_prime(candidate)) ++candidate;
        o.push_back(e.n_rows);
        p.push_back(candidate);
        e.n_rows += candidate++;
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace deepinfer
