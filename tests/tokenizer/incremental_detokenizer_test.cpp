// IncrementalDetokenizer on hand-picked sequences. The whole-decode values it must add up to
// come from the `tokenizers` library (0.22.1): DeepSeek-V3 encodes "你" as [804] and "🙂" as
// [80300, 227]; the Mistral v1 tokenizer spells characters outside its vocabulary as <0xXX> byte
// tokens. (reference_test.cpp streams every reference sequence as well.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

Tokenizer load(const std::string& name) { return *Tokenizer::Load("tests/data/tokenizers/" + name); }

std::vector<std::string> deltas(const Tokenizer& t, const std::vector<int32_t>& ids, bool skip) {
  IncrementalDetokenizer d(t, skip);
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(*d.push(id));
  out.push_back(*d.finish());
  return out;
}

TEST(IncrementalDetokenizer, HoldsHalfCharactersOfByteLevelTokens) {
  const Tokenizer t = load("deepseek-v3");
  // "🙂" is two tokens; the first alone is half a character.
  EXPECT_EQ(deltas(t, {80300, 227, 804}, false), (std::vector<std::string>{"", "🙂", "你", ""}));
  // A dangling first half is what the full decode shows: U+FFFD, at finish.
  EXPECT_EQ(deltas(t, {804, 80300}, false), (std::vector<std::string>{"你", "", "\xEF\xBF\xBD"}));
}

TEST(IncrementalDetokenizer, SkipsSpecialTokensLikeDecode) {
  const Tokenizer t = load("deepseek-v3");
  EXPECT_EQ(deltas(t, {0, 19923, 2058, 1}, true), (std::vector<std::string>{"", "Hello", " world", "", ""}));
  EXPECT_EQ(deltas(t, {0, 19923, 1}, false),
            (std::vector<std::string>{"<｜begin▁of▁sentence｜>", "Hello", "<｜end▁of▁sentence｜>", ""}));
}

TEST(IncrementalDetokenizer, ByteFallbackTokensWaitForTheirCharacter) {
  const Tokenizer t = load("mistral-v1-legacy");
  auto ids = *t.encode("a 龘 b", false);
  std::vector<int32_t> byte_ids;
  for (int32_t id : ids) {
    if (t.id_to_token(id)->starts_with("<0x")) byte_ids.push_back(id);
  }
  ASSERT_EQ(byte_ids.size(), 3u) << "the test needs a character outside the vocabulary";
  std::string joined;
  IncrementalDetokenizer d(t, false);
  for (int32_t id : ids) {
    const std::string delta = *d.push(id);
    EXPECT_EQ(delta.find("\xEF\xBF\xBD"), std::string::npos);
    joined += delta;
  }
  joined += *d.finish();
  EXPECT_EQ(joined, *t.decode(ids, false));
  EXPECT_EQ(joined, "a 龘 b");
}

TEST(IncrementalDetokenizer, MetaspaceKeepsSpacesAfterTheFirstToken) {
  // The Strip decoder removes only the text's first space, not each window's.
  const Tokenizer t = load("mistral-v1-metaspace");
  const auto ids = *t.encode("Hello big world", false);
  std::string joined;
  for (const auto& delta : deltas(t, ids, false)) joined += delta;
  EXPECT_EQ(joined, "Hello big world");
}

TEST(IncrementalDetokenizer, UnknownIdIsAnErrorAndChangesNothing) {
  const Tokenizer t = load("deepseek-v3");
  IncrementalDetokenizer d(t, false);
  EXPECT_EQ(*d.push(19923), "Hello");
  auto bad = d.push(1 << 30);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(*d.push(2058), " world");
}

}  // namespace
}  // namespace deepinfer
