// libFuzzer target for the tokenizer: arbitrary bytes as text to encode, as ids to decode and
// stream, and as tokenizer.json to load. Bad input must come back as a failed Result, never a
// crash; the checks below abort on broken invariants:
//   - encode fails exactly when the text is not valid UTF-8;
//   - decode(encode(text)) == text, for a lossless tokenizer (byte-level, no normalizer; set
//     DEEPINFER_FUZZ_ROUND_TRIP=0 for one that normalizes);
//   - decode fails exactly when an id has no token; its text is valid UTF-8;
//   - the concatenated IncrementalDetokenizer output equals decode.
// The tokenizer is DEEPINFER_FUZZ_TOKENIZER (a model folder), by default the DeepSeek-V3 one in
// tests/data/tokenizers (run from the project root):
//   build-fuzz/fuzz/fuzz_tokenizer -max_total_time=60
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

std::optional<deepinfer::Tokenizer>& tokenizer() {
  static std::optional<deepinfer::Tokenizer> t;
  return t;
}

bool check_round_trip = true;

void check_encode(const deepinfer::Tokenizer& t, std::string_view text) {
  const bool valid = deepinfer::utf8::find_invalid(text) == std::string_view::npos;
  auto ids = t.encode(text, /*add_special_tokens=*/false);
  DI_CHECK(ids.ok() == valid);
  if (!ids.ok()) return;
  auto back = t.decode(*ids, /*skip_special_tokens=*/false);
  DI_CHECK(back.ok());
  DI_CHECK(!check_round_trip || *back == text);
}

void check_decode(const deepinfer::Tokenizer& t, const uint8_t* data, size_t size, bool skip) {
  std::vector<int32_t> ids;
  bool all_known = true;
  for (size_t i = 0; i + 3 <= size; i += 3) {
    // Mostly ids inside the vocabulary, sometimes just past it.
    const uint32_t raw = uint32_t(data[i]) | (uint32_t(data[i + 1]) << 8) | (uint32_t(data[i + 2]) << 16);
    const auto id = static_cast<int32_t>(raw % (t.vocab_size() + 16));
    all_known = all_known && t.id_to_token(id).has_value();
    ids.push_back(id);
  }
  auto text = t.decode(ids, skip);
  DI_CHECK(text.ok() == all_known);
  if (!text.ok()) return;
  DI_CHECK(deepinfer::utf8::find_invalid(*text) == std::string_view::npos);
  deepinfer::IncrementalDetokenizer stream(t, skip);
  std::string joined;
  for (int32_t id : ids) {
    auto delta = stream.push(id);
    DI_CHECK(delta.ok());
    DI_CHECK(deepinfer::utf8::find_invalid(*delta) == std::string_view::npos);
    joined += *delta;
  }
  joined += *stream.finish();
  DI_CHECK(joined == *text);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* dir = std::getenv("DEEPINFER_FUZZ_TOKENIZER");
  auto loaded = deepinfer::Tokenizer::Load(dir ? dir : "tests/data/tokenizers/deepseek-v3");
  DI_CHECK_MSG(loaded.ok(), "%s", loaded.status().message().c_str());
  tokenizer() = *loaded;
  const char* round_trip = std::getenv("DEEPINFER_FUZZ_ROUND_TRIP");
  check_round_trip = round_trip == nullptr || std::strcmp(round_trip, "0") != 0;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const deepinfer::Tokenizer& t = *tokenizer();
  const uint8_t mode = data[0] % 4;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (mode) {
    case 0:
      check_encode(t, rest);
      break;
    case 1:
      check_decode(t, data + 1, size - 1, /*skip=*/mode == 1 && (size & 1));
      break;
    case 2: {
      // Text made of special-token-like pieces exercises the added-token matcher.
      std::string text;
      const char* pieces[] = {"<｜", "｜>", "User", "<｜User｜>", "<｜end▁of▁sentence｜>", " ", "\n", "a"};
      for (char c : rest) text += pieces[static_cast<uint8_t>(c) % 8];
      check_encode(t, text);
      break;
    }
    default:
      (void)deepinfer::Tokenizer::FromJson(rest);  // must not crash on any JSON
      break;
  }
  return 0;
}
