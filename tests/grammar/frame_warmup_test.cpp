// Frame warm-up (grammar/frame_warmup.h) over the DeepSeek-V3 vocabulary: every sample text walks
// whole under the option sets the server uses, a warmed store serves the string, number and
// literal states of other schemas without computing a frame, and the masks of a warmed
// vocabulary equal those of a cold one. (Frames that reach into a schema's own rules, such as
// a number's end, stay per schema.)
#include "grammar/frame_warmup.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "grammar/grammar_mask_cache.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::grammar {
namespace {

std::shared_ptr<const TokenVocabulary> load_vocabulary() {
  auto tok = Tokenizer::Load("tests/data/tokenizers/deepseek-v3");
  EXPECT_TRUE(tok.ok()) << tok.status().message();
  auto v = TokenVocabulary::FromTokenizer(tok.value());
  EXPECT_TRUE(v.ok()) << v.status().message();
  return std::make_shared<const TokenVocabulary>(std::move(v).value());
}

const char* kSchema = R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
  "score": {"type": "number"}, "ok": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string"}}}})";
// States of kSchema inside a string, a number, an integer, a literal and an array of strings.
const std::vector<std::string> kPrefixes = {"{\"name\": \"ab", "{\"name\": \"a\\", "{\"age\": -1", "{\"score\": 2.5e",
                                            "{\"ok\": tr", "{\"tags\": [\"x\", \"é"};

TEST(FrameWarmupTest, WarmedFramesServeOtherSchemasAndEqualColdMasks) {
  const std::shared_ptr<const TokenVocabulary> warm = load_vocabulary(), cold = load_vocabulary();
  std::atomic<bool> cancel = true;
  EXPECT_EQ(warm_json_frames(cold, {}, cancel), 0u);  // cancelled: stops before any mask
  EXPECT_EQ(cold->frame_masks().size(), 0u);
  cancel = false;
  JsonSchemaOptions tool_options;  // as strict tool arguments compile: '<' escaped, short exponents
  tool_options.escape_less_than = true;
  tool_options.max_exponent_digits = 2;
  JsonSchemaOptions dsml_options = tool_options;
  dsml_options.escape_less_than = false;
  dsml_options.escaped_code_points = {{0xFF5C, 0xFF5C}};
  for (const JsonSchemaOptions& options : {JsonSchemaOptions{}, tool_options, dsml_options}) {
    // Every sample text walks whole: 3 texts, spaced and compact, a mask per byte boundary.
    EXPECT_GT(warm_json_frames(warm, options, cancel), 400u);
  }
  EXPECT_GT(warm->frame_masks().size(), 10u);

  auto g = CompiledGrammar::FromJsonSchema(kSchema);
  ASSERT_TRUE(g.ok()) << g.status().message();
  GrammarMaskCache warm_cache(g.value(), warm), cold_cache(g.value(), cold);
  std::vector<uint32_t> a(warm->bitmask_words()), b(cold->bitmask_words());
  for (const std::string& prefix : kPrefixes) {
    const int32_t s = warm_cache.walk(warm_cache.initial_state(), prefix);
    ASSERT_NE(s, GrammarAutomaton::kDead) << prefix;
    warm_cache.fill_mask(s, a.data());
    cold_cache.fill_mask(cold_cache.walk(cold_cache.initial_state(), prefix), b.data());
    EXPECT_EQ(a, b) << prefix;
  }
  EXPECT_GT(cold->frame_masks().size(), 0u);
  // A string's escape state is framed alone, so the warmed frame serves every schema's strings.
  const size_t n_before = warm->frame_masks().size();
  warm_cache.fill_mask(warm_cache.walk(warm_cache.initial_state(), "{\"ok\": false, \"tags\": [\"\\"), a.data());
  EXPECT_EQ(warm->frame_masks().size(), n_before);
}

}  // namespace
}  // namespace deepinfer::grammar
