// The token-level matcher over the DeepSeek-V3 vocabulary (129K tokens), checked against a
// brute-force reference: each token's bytes walked through a separate byte-level automaton.
#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "grammar/compiled_grammar.h"
#include "grammar/grammar_automaton.h"
#include "grammar/grammar_mask_cache.h"
#include "grammar/grammar_matcher.h"
#include "grammar/token_vocabulary.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::grammar {
namespace {

class GrammarMatcherTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto tok = Tokenizer::Load("tests/data/tokenizers/deepseek-v3");
    ASSERT_TRUE(tok.ok()) << tok.status().message();
    tokenizer_ = new Tokenizer(std::move(tok).value());
    auto v = TokenVocabulary::FromTokenizer(*tokenizer_);
    ASSERT_TRUE(v.ok()) << v.status().message();
    vocab_ = std::make_shared<const TokenVocabulary>(std::move(v).value());
  }
  static void TearDownTestSuite() { delete tokenizer_; }

  static bool allowed(const std::vector<uint32_t>& mask, int32_t id) {
    return (mask[size_t(id) / 32] >> (id % 32)) & 1;
  }

  // The reference mask of the state after `bytes`: token by token through a fresh automaton.
  static std::vector<uint32_t> reference_mask(const CompiledGrammar& g, const std::string& bytes, bool ended) {
    std::vector<uint32_t> mask(vocab_->bitmask_words(), 0);
    GrammarAutomaton a(g.grammar());
    const int32_t state = a.walk(a.initial_state(), bytes);
    EXPECT_NE(state, GrammarAutomaton::kDead);
    for (size_t id = 0; id < vocab_->size(); ++id) {
      bool ok;
      if (vocab_->is_end(int32_t(id))) {
        ok = ended || a.accepts(state);
      } else {
        const std::string& t = vocab_->bytes(int32_t(id));
        ok = !ended && !t.empty() && a.walk(state, t) != GrammarAutomaton::kDead;
      }
      if (ok) mask[id / 32] |= uint32_t(1) << (id % 32);
    }
    return mask;
  }

  static Tokenizer* tokenizer_;
  static std::shared_ptr<const TokenVocabulary> vocab_;
};

Tokenizer* GrammarMatcherTest::tokenizer_ = nullptr;
std::shared_ptr<const TokenVocabulary> GrammarMatcherTest::vocab_;

TEST_F(GrammarMatcherTest, VocabularyHoldsEachTokensBytes) {
  EXPECT_EQ(vocab_->size(), tokenizer_->vocab_size());
  const std::string text = "Hello world, \xc3\xa9t\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 {\"a\": 1}\n";
  auto ids = tokenizer_->encode(text, false);
  ASSERT_TRUE(ids.ok());
  std::string joined;
  for (int32_t id : *ids) joined += vocab_->bytes(id);
  EXPECT_EQ(joined, text);
  ASSERT_FALSE(vocab_->end_ids().empty());
  for (int32_t id : vocab_->end_ids()) EXPECT_TRUE(vocab_->bytes(id).empty() || tokenizer_->is_special_id(id));
}

TEST_F(GrammarMatcherTest, MaskEqualsBruteForceOnRandomWalks) {
  const std::vector<std::pair<const char*, Result<CompiledGrammar>>> grammars = [] {
    std::vector<std::pair<const char*, Result<CompiledGrammar>>> g;
    g.emplace_back("tool schema", CompiledGrammar::FromJsonSchema(R"({
      "type": "object",
      "properties": {
        "location": {"type": "string", "maxLength": 12},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]{1,5}$"}, "maxItems": 3}
      },
      "required": ["location", "unit"], "additionalProperties": false})"));
    g.emplace_back("json object", CompiledGrammar::AnyJsonObject());
    g.emplace_back("regex", CompiledGrammar::FromRegex("(\\+\\d{1,3} )?\\(?\\d{3}\\)?[ -]?\\d{3}-\\d{4}"));
    g.emplace_back("ebnf", CompiledGrammar::FromEbnf(R"(
      root ::= "SELECT " cols " FROM " name (" WHERE " name " = " [0-9]+)? ";"
      cols ::= "*" | name (", " name)*
      name ::= [a-z_] [a-z_0-9]*)"));
    return g;
  }();
  std::mt19937 rng(7);
  size_t n_checked = 0;
  for (const auto& [label, compiled] : grammars) {
    ASSERT_TRUE(compiled.ok()) << label << ": " << compiled.status().message();
    GrammarMatcher m(compiled.value(), vocab_);
    std::string bytes;
    std::vector<uint32_t> mask(vocab_->bitmask_words());
    for (int step = 0; step < 24 && !m.is_terminated(); ++step) {
      m.fill_next_token_bitmask(mask.data());
      ASSERT_EQ(mask, reference_mask(compiled.value(), bytes, false)) << label << " after '" << bytes << "'";
      ++n_checked;
      // Prefer tokens that close structures after a few steps, so that walks reach deep states
      // and ends.
      std::vector<int32_t> ids;
      for (size_t id = 0; id < vocab_->size(); ++id) {
        if (allowed(mask, int32_t(id)) && !vocab_->is_end(int32_t(id))) ids.push_back(int32_t(id));
      }
      if (ids.empty()) break;
      const int32_t pick = ids[rng() % ids.size()];
      ASSERT_TRUE(m.accept_token(pick));
      bytes += vocab_->bytes(pick);
      // The cached mask of a state seen again is the same mask.
      std::vector<uint32_t> again(vocab_->bitmask_words());
      m.fill_next_token_bitmask(mask.data());
      m.fill_next_token_bitmask(again.data());
      ASSERT_EQ(mask, again);
    }
  }
  EXPECT_GE(n_checked, 40u);
  RecordProperty("states_checked", int(n_checked));
}

TEST_F(GrammarMatcherTest, MaskEqualsBruteForceAtFixedStates) {
  // Inside strings (where whole trie subtrees are taken at once), mid-character, in keys.
  auto g = CompiledGrammar::FromJsonSchema(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "short": {"type": "string", "maxLength": 3}},
      "additionalProperties": {"type": "integer"}})");
  ASSERT_TRUE(g.ok()) << g.status().message();
  for (const char* prefix : {"{\"name\":\"", "{\"name\":\"ab\\", "{\"name\":\"\xe4", "{\"short\":\"ab",
                             "{\"nam", "{\"name\":\"x\",\"o", "{\"zz\":-1"}) {
    GrammarMatcher m(*g, vocab_);
    ASSERT_TRUE(m.accept_bytes(prefix)) << prefix;
    std::vector<uint32_t> mask(vocab_->bitmask_words());
    m.fill_next_token_bitmask(mask.data());
    EXPECT_EQ(mask, reference_mask(*g, prefix, false)) << prefix;
  }
}

// Frame masks are shared by every grammar over a vocabulary (FrameMaskStore): masks built from
// another grammar's frames must still be each state's exact mask, on random walks through
// schemas that share structures (strings, arrays of strings, nested objects) but not positions.
TEST_F(GrammarMatcherTest, MasksFromSharedFrameMasksEqualBruteForceAcrossSchemas) {
  const char* schemas[] = {
      R"({"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
          "required": ["name", "n"], "additionalProperties": false})",
      R"({"type": "object", "properties": {"city": {"type": "string"}, "tags": {"type": "array",
          "items": {"type": "string"}}, "inner": {"type": "object", "properties": {"note": {"type": "string"}},
          "required": ["note"]}}, "required": ["city", "tags", "inner"], "additionalProperties": false})",
      R"({"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string", "maxLength": 8},
          "v": {"type": "number"}}, "required": ["k", "v"]}, "minItems": 2})",
      R"({"type": "object", "properties": {"title": {"type": "string"}, "done": {"type": "boolean"}},
          "required": ["title", "done"]})",
  };
  std::mt19937 rng(11);
  size_t n_checked = 0;
  const size_t hits_before = vocab_->frame_masks().hits();
  for (int round = 0; round < 2; ++round) {
    for (const char* schema : schemas) {
      auto g = CompiledGrammar::FromJsonSchema(schema);
      ASSERT_TRUE(g.ok()) << g.status().message();
      GrammarMatcher m(*g, vocab_);
      std::string bytes;
      std::vector<uint32_t> mask(vocab_->bitmask_words());
      for (int step = 0; step < 12 && !m.is_terminated(); ++step) {
        m.fill_next_token_bitmask(mask.data());
        ASSERT_EQ(mask, reference_mask(*g, bytes, false)) << schema << " after '" << bytes << "'";
        ++n_checked;
        std::vector<int32_t> ids;
        for (size_t id = 0; id < vocab_->size(); ++id) {
          if (allowed(mask, int32_t(id)) && !vocab_->is_end(int32_t(id))) ids.push_back(int32_t(id));
        }
        if (ids.empty()) break;
        // Mostly short tokens, so that walks go through keys, strings and their ends.
        int32_t pick = ids[rng() % ids.size()];
        for (int t = 0; t < 4 && vocab_->bytes(pick).size() > 3; ++t) pick = ids[rng() % ids.size()];
        ASSERT_TRUE(m.accept_token(pick));
        bytes += vocab_->bytes(pick);
      }
    }
  }
  EXPECT_GE(n_checked, 60u);
  // Later schemas (and the second round, with new caches) found frames computed before.
  EXPECT_GT(vocab_->frame_masks().hits(), hits_before);
}

// The inside of a JSON string is one frame structure for every schema: after the first schema's
// string, another schema's string (other keys, other nesting) computes no new frame mask.
TEST_F(GrammarMatcherTest, StringInteriorFrameIsSharedBetweenSchemas) {
  auto a = CompiledGrammar::FromJsonSchema(R"({"type": "object", "properties": {"alpha": {"type": "string"}},
      "required": ["alpha"]})");
  auto b = CompiledGrammar::FromJsonSchema(R"({"type": "array", "items": {"type": "object", "properties":
      {"zz": {"type": "integer"}, "y": {"type": "string"}}, "required": ["zz", "y"]}})");
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<uint32_t> mask(vocab_->bitmask_words());
  GrammarMatcher ma(*a, vocab_);
  ASSERT_TRUE(ma.accept_bytes(R"({"alpha":"ab)"));
  ma.fill_next_token_bitmask(mask.data());
  EXPECT_EQ(mask, reference_mask(*a, R"({"alpha":"ab)", false));
  const size_t stored = vocab_->frame_masks().size(), hits = vocab_->frame_masks().hits();
  GrammarMatcher mb(*b, vocab_);
  ASSERT_TRUE(mb.accept_bytes(R"([{"zz":1,"y":"q)"));
  mb.fill_next_token_bitmask(mask.data());
  EXPECT_EQ(mask, reference_mask(*b, R"([{"zz":1,"y":"q)", false));
  EXPECT_EQ(vocab_->frame_masks().size(), stored);
  EXPECT_EQ(vocab_->frame_masks().hits(), hits + 1);
}

// A mask cache too small for one mask (frame masks counted in it) clears at every miss and still
// gives exact masks.
TEST_F(GrammarMatcherTest, TinyMaskCacheStillGivesExactMasks) {
  auto g = CompiledGrammar::FromJsonSchema(R"({"type": "object", "properties": {"s": {"type": "string"},
      "a": {"type": "array", "items": {"type": "string"}}}, "required": ["s", "a"]})");
  ASSERT_TRUE(g.ok());
  MatcherOptions options;
  options.mask_cache_bytes = 1;
  GrammarMatcher m(*g, vocab_, options);
  std::vector<uint32_t> mask(vocab_->bitmask_words());
  std::string bytes;
  for (const char* piece : {"{\"s\":\"", "x y", "\",\"a\":[\"", "q", "\",\""}) {
    ASSERT_TRUE(m.accept_bytes(piece)) << piece;
    bytes += piece;
    for (int again = 0; again < 2; ++again) {
      m.fill_next_token_bitmask(mask.data());
      ASSERT_EQ(mask, reference_mask(*g, bytes, false)) << bytes;
    }
  }
  EXPECT_EQ(m.cache()->n_cached_masks(), 1u);
}

TEST_F(GrammarMatcherTest, MatchersSharingACacheGetTheSameMasks) {
  auto g = CompiledGrammar::FromJsonSchema(R"({"type": "array", "items": {"type": "string"}})");
  ASSERT_TRUE(g.ok());
  auto cache = std::make_shared<GrammarMaskCache>(*g, vocab_);
  auto ids = tokenizer_->encode("[\"hello\", \"world\"]", false);
  ASSERT_TRUE(ids.ok());
  std::vector<std::vector<uint32_t>> first;
  std::vector<uint32_t> mask(vocab_->bitmask_words());
  GrammarMatcher a(cache);
  for (int32_t id : *ids) {
    a.fill_next_token_bitmask(mask.data());
    first.push_back(mask);
    ASSERT_TRUE(a.accept_token(id));
  }
  const size_t cached = cache->n_cached_masks();
  GrammarMatcher b(cache), own(*g, vocab_);
  for (size_t i = 0; i < ids->size(); ++i) {
    b.fill_next_token_bitmask(mask.data());
    EXPECT_EQ(mask, first[i]);
    own.fill_next_token_bitmask(mask.data());
    EXPECT_EQ(mask, first[i]);
    ASSERT_TRUE(b.accept_token((*ids)[i]));
    ASSERT_TRUE(own.accept_token((*ids)[i]));
  }
  EXPECT_EQ(cache->n_cached_masks(), cached);  // the second sequence computed nothing
}

TEST_F(GrammarMatcherTest, RejectsDisallowedTokensAndEndsOnlyWhereAccepted) {
  auto g = CompiledGrammar::FromRegex("ab(c|d)");
  ASSERT_TRUE(g.ok());
  GrammarMatcher m(*g, vocab_);
  const int32_t eos = vocab_->end_ids()[0];
  auto id_of = [&](const char* text) {
    auto ids = tokenizer_->encode(text, false);
    EXPECT_TRUE(ids.ok() && ids->size() == 1) << text;
    return (*ids)[0];
  };
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.accept_token(eos));
  EXPECT_FALSE(m.accept_token(id_of("x")));
  EXPECT_TRUE(m.accept_token(id_of("ab")));
  EXPECT_FALSE(m.accept_token(id_of("ab")));
  EXPECT_TRUE(m.accept_token(id_of("d")));
  EXPECT_TRUE(m.can_end());
  EXPECT_TRUE(m.is_terminated());  // nothing can follow "abd"
  std::vector<uint32_t> mask(vocab_->bitmask_words());
  m.fill_next_token_bitmask(mask.data());
  size_t n_allowed = 0;
  for (size_t id = 0; id < vocab_->size(); ++id) n_allowed += allowed(mask, int32_t(id));
  EXPECT_EQ(n_allowed, vocab_->end_ids().size());
  EXPECT_TRUE(allowed(mask, eos));
  EXPECT_TRUE(m.accept_token(eos));
  EXPECT_TRUE(m.is_terminated());
  EXPECT_EQ(m.n_steps(), 3u);
}

TEST_F(GrammarMatcherTest, MinBytesToEndIsTheShortestCompletion) {
  auto re = CompiledGrammar::FromRegex("ab(c|de)x*");
  ASSERT_TRUE(re.ok());
  GrammarMatcher m(*re, vocab_);
  EXPECT_EQ(m.min_bytes_to_end(), 3u);
  for (auto [bytes, distance] : {std::pair{"a", 2u}, {"bd", 1u}, {"e", 0u}, {"xx", 0u}}) {
    ASSERT_TRUE(m.accept_bytes(bytes));
    EXPECT_EQ(m.min_bytes_to_end(), distance) << bytes;
  }
  auto js = CompiledGrammar::FromJsonSchema(R"({"type": "object", "properties": {"a": {"type": "string"},
      "b": {"type": "array", "items": {"type": "integer"}, "minItems": 2}}, "required": ["a", "b"]})");
  ASSERT_TRUE(js.ok());
  GrammarMatcher j(*js, vocab_);
  EXPECT_EQ(j.min_bytes_to_end(), std::string(R"({"a":"","b":[0,0]})").size());
  ASSERT_TRUE(j.accept_bytes(R"({"a":"xyz)"));
  EXPECT_EQ(j.min_bytes_to_end(), std::string(R"(","b":[0,0]})").size());
}

TEST_F(GrammarMatcherTest, RollbackRestoresEarlierMasks) {
  auto g = CompiledGrammar::FromJsonSchema(R"({"type": "array", "items": {"type": "integer"}})");
  ASSERT_TRUE(g.ok());
  GrammarMatcher m(*g, vocab_);
  std::vector<std::vector<uint32_t>> masks;
  std::vector<uint32_t> mask(vocab_->bitmask_words());
  auto ids = tokenizer_->encode("[12, 345, 6]", false);
  ASSERT_TRUE(ids.ok());
  for (int32_t id : *ids) {
    m.fill_next_token_bitmask(mask.data());
    masks.push_back(mask);
    ASSERT_TRUE(allowed(mask, id));
    ASSERT_TRUE(m.accept_token(id));
  }
  EXPECT_TRUE(m.can_end());
  for (size_t back = 1; back <= ids->size(); ++back) {
    m.rollback(1);
    m.fill_next_token_bitmask(mask.data());
    EXPECT_EQ(mask, masks[ids->size() - back]);
  }
  EXPECT_EQ(m.n_steps(), 0u);
  EXPECT_TRUE(m.accept_bytes("[1"));
  EXPECT_FALSE(m.accept_bytes("x"));
  EXPECT_EQ(m.n_steps(), 1u);
}

TEST_F(GrammarMatcherTest, PassingALimitFailsTheMatcherNotTheProcess) {
  // After an 'a' several parses are alive at once: more than the limit allows.
  auto g = CompiledGrammar::FromEbnf("root ::= x*\nx ::= \"a\" | \"a\" \"a\" | \"a\" \"a\" \"a\"");
  ASSERT_TRUE(g.ok());
  MatcherOptions options;
  options.automaton.max_leaves_per_state = 2;
  GrammarMatcher m(*g, vocab_, options);
  EXPECT_FALSE(m.accept_bytes(std::string(200, 'a')));
  std::vector<uint32_t> mask(vocab_->bitmask_words());
  m.fill_next_token_bitmask(mask.data());
  ASSERT_FALSE(m.status().ok());
  EXPECT_NE(m.status().message().find("parses alive at once"), std::string::npos);
  for (size_t id = 0; id < vocab_->size(); ++id) EXPECT_EQ(allowed(mask, int32_t(id)), vocab_->is_end(int32_t(id)));
}

}  // namespace
}  // namespace deepinfer::grammar
