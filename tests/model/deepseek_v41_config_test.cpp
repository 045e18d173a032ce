// DeepSeek-V4.1 config.json and Engram hashing. Expected values: the fixture's config.json
// (tests/data/models/tiny-v41, from ../shared/fixtures, in the published V4.1-Flash layout) and
// its engram_token_map.json, which the fixture generator derived with the reference's own
// build_compressed_token_map and hash setup (transformers models/deepseek_v41 @ 0a2080b4, numpy's
// default_rng); NumpyRng draws checked against numpy 2.1.3 (values listed below).
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/deepseek_v41/config.h"
#include "model/deepseek_v41/engram_hash.h"
#include "model/deepseek_v41/numpy_rng.h"

namespace deepinfer {
namespace {

const char* kTiny = "tests/data/models/tiny-v41";

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return nlohmann::json::parse(ss.str());
}

TEST(DeepseekV41Config, LoadsTheFixturesCompositeConfig) {
  auto c = DeepseekV41Config::Load(kTiny);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->has_vision);
  EXPECT_EQ(c->num_hidden_layers, 10);
  EXPECT_EQ(c->hidden_size, 64);
  EXPECT_EQ(c->head_dim, 40);
  EXPECT_EQ(c->compress_ratios, (std::vector<int>{0, 0, 2, 2, 2, 2, 1, 1, 1, 1, 0}));
  EXPECT_EQ(c->kv_source_layer_ids, (std::vector<int>{2, 4, 6}));
  EXPECT_EQ(c->index_source_layer_ids, (std::vector<int>{2, 4, 6, 8}));
  EXPECT_EQ(c->candidate_source_layer_id, 6);
  EXPECT_EQ(c->candidate_topk_blocks, 4);
  EXPECT_EQ(c->candidate_block_size, 4);
  EXPECT_EQ(c->engram_layer_ids, (std::vector<int>{1, 4}));
  EXPECT_EQ(c->engram_pad_id, 2);
  EXPECT_EQ(c->engram_compressed_vocab_size, 270);
  EXPECT_DOUBLE_EQ(c->rms_norm_eps, 1e-20);
  EXPECT_DOUBLE_EQ(c->gate_temp, 1.0);  // absent: the reference's default
  EXPECT_EQ(c->image_token_id, 1022);
  EXPECT_TRUE(c->rope_scaling.yarn);
  EXPECT_EQ(c->kv_source_of(1), -1);
  EXPECT_EQ(c->kv_source_of(3), 2);
  EXPECT_EQ(c->kv_source_of(9), 6);
  EXPECT_EQ(c->engram_index(4), 1);
}

class DeepseekV41ConfigErrors : public ::testing::Test {
 protected:
  nlohmann::json j = read_json(std::string(kTiny) + "/config.json");
  std::string error() {
    auto c = DeepseekV41Config::FromJson(j, "config.json");
    return c.ok() ? "" : c.status().message();
  }
};

TEST_F(DeepseekV41ConfigErrors, UnknownKeysAreNamed) {
  j["text_config"]["engram_gate_mode"] = 1;
  EXPECT_NE(error().find("'engram_gate_mode' is not known"), std::string::npos) << error();
  j["text_config"].erase("engram_gate_mode");
  j["speculator"] = nullptr;
  EXPECT_NE(error().find("'speculator' is not known"), std::string::npos) << error();
}

TEST_F(DeepseekV41ConfigErrors, BothPadSpellingsAndTheirDisagreement) {
  j["text_config"].erase("engram_pad_token_id");
  j["text_config"]["engram_pad_id"] = 5;
  auto c = DeepseekV41Config::FromJson(j, "config.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->engram_pad_id, 5);
  j["text_config"]["engram_pad_token_id"] = 2;
  EXPECT_NE(error().find("disagree"), std::string::npos) << error();
}

TEST_F(DeepseekV41ConfigErrors, RatiosAndSourcesMustAgree) {
  j["text_config"]["compress_ratios"][3] = 1;  // reuses source 2, which compresses at 2
  EXPECT_NE(error().find("layer 3 has compress ratio 1 but its KV source 2 has 2"), std::string::npos) << error();
  j["text_config"]["compress_ratios"][3] = 4;
  EXPECT_NE(error().find("compress_ratios"), std::string::npos) << error();
  j["text_config"]["compress_ratios"][3] = 2;
  j["text_config"]["kv_source_layer_ids"] = {4, 6};  // layer 2 compressed with no source
  EXPECT_NE(error().find("layer 2 is compressed but no KV source precedes it"), std::string::npos) << error();
}

TEST_F(DeepseekV41ConfigErrors, TextConfigIsRequired) {
  j.erase("text_config");
  EXPECT_NE(error().find("text_config"), std::string::npos) << error();
}

// numpy 2.1.3: np.random.default_rng(s).integers(0, 2**62, 3) for s = 0, 10007, 2**40 + 3.
TEST(NumpyRng, IntegersMatchNumpy) {
  const struct {
    uint64_t seed;
    int64_t v[3];
  } cases[] = {
      {0, {2937467307694268567, 1244171615822312904, 188957027462249006}},
      {10007, {3796813830707316620, 239796500919311629, 1781657924734481866}},
      {(uint64_t(1) << 40) + 3, {3567858950595158475, 4592581556621908176, 2182152584693574434}},
  };
  for (const auto& c : cases) {
    NumpyRng rng(c.seed);
    for (int i = 0; i < 3; ++i) {
      auto v = rng.integers(0, int64_t(1) << 62);
      ASSERT_TRUE(v.ok());
      EXPECT_EQ(*v, c.v[i]) << "seed " << c.seed << " draw " << i;
    }
  }
}

TEST(EngramHash, TokenMapPrimesAndMultipliersEqualTheReference) {
  const nlohmann::json m = read_json(std::string(kTiny) + "/engram_token_map.json");
  auto c = DeepseekV41Config::Load(kTiny);
  ASSERT_TRUE(c.ok()) << c.status().message();
  std::vector<std::string> texts, raw;
  ASSERT_TRUE(engram_token_texts(kTiny, c->vocab_size, texts, raw).ok());
  int32_t n_compressed = 0;
  const std::vector<int32_t> lookup = engram_compressed_ids(texts, raw, &n_compressed);
  EXPECT_EQ(n_compressed, m["compressed_vocab_size"].get<int>());
  EXPECT_EQ(n_compressed, c->engram_compressed_vocab_size);
  EXPECT_EQ(lookup, m["lookup"].get<std::vector<int32_t>>());
  EXPECT_EQ(lookup[size_t(c->engram_pad_id)], m["pad_compressed_id"].get<int32_t>());

  auto hashes = engram_layer_hashes(c->engram_layer_ids, c->engram_max_ngram_size, c->engram_n_heads,
                                    c->engram_vocab_size, n_compressed);
  ASSERT_TRUE(hashes.ok()) << hashes.status().message();
  ASSERT_EQ(hashes->size(), 2u);
  for (size_t l = 0; l < hashes->size(); ++l) {
    const EngramLayerHash& h = (*hashes)[l];
    EXPECT_EQ(h.multipliers, m["multipliers"][l].get<std::vector<int64_t>>()) << "layer " << l;
    EXPECT_EQ(h.primes, m["primes"][l].get<std::vector<std::vector<int64_t>>>()) << "layer " << l;
    EXPECT_EQ(h.n_rows, c->engram_num_embeddings[l]) << "layer " << l;
  }
}

// The published tokenizer (DeepSeek-V4's, tests/data/tokenizers/deepseek-v4, byte-level BPE):
// 99,092 compressed ids as notes/deepseek-v41.md gives for V4.1-Flash; the whole map's digest
// (h = h * 1000003 + id mod 2^61 - 1 over ids in order) is that of the reference's rule run with
// the Hugging Face tokenizers library 0.22.1 (normalizers NFKC, NFD, StripAccents, Lowercase,
// Replace, Strip; decode of each id), 1163984211020869586.
TEST(EngramHash, PublishedTokenizerCompressesTo99092Ids) {
  const char* tok = "tests/data/tokenizers/deepseek-v4";
  std::vector<std::string> texts, raw;
  ASSERT_TRUE(engram_token_texts(tok, 129280, texts, raw).ok());
  int32_t n_compressed = 0;
  const std::vector<int32_t> lookup = engram_compressed_ids(texts, raw, &n_compressed);
  EXPECT_EQ(n_compressed, 99092);
  const uint64_t p = (uint64_t(1) << 61) - 1;
  uint64_t h = 0;
  for (int32_t v : lookup) h = uint64_t((static_cast<unsigned __int128>(h) * 1000003 + uint64_t(v)) % p);
  EXPECT_EQ(h, 1163984211020869586ULL);
}

// V4.1-Flash's published config.json: engram_vocab_size 16,000,000, 2..4-grams x 8 heads on
// layers 1 and 14, compressed vocabulary 99,092; its engram_num_embeddings, 384,006,168 and
// 384,016,682 (also in notes/deepseek-v41.md), are the sums of the primes this draws.
TEST(EngramHash, FlashTablesHaveThePublishedRowCounts) {
  auto hashes = engram_layer_hashes({1, 14}, 4, 8, 16000000, 99092);
  ASSERT_TRUE(hashes.ok()) << hashes.status().message();
  EXPECT_EQ((*hashes)[0].n_rows, 384006168);
  EXPECT_EQ((*hashes)[1].n_rows, 384016682);
  EXPECT_EQ((*hashes)[0].primes[0][0], 16000057);  // the first prime >= 16,000,000
}

// The rows of every (layer, n, head) at every position of a sequence with repeats, against the
// formula restated from the token map's primes and multipliers (engram_token_map.json).
TEST(EngramHash, RowsFollowTheReferenceFormula) {
  const nlohmann::json m = read_json(std::string(kTiny) + "/engram_token_map.json");
  auto c = DeepseekV41Config::Load(kTiny);
  ASSERT_TRUE(c.ok());
  auto hashes = engram_layer_hashes(c->engram_layer_ids, 4, 2, c->engram_vocab_size, 270);
  ASSERT_TRUE(hashes.ok());
  const std::vector<int32_t> lookup = m["lookup"].get<std::vector<int32_t>>();
  const int32_t pad = m["pad_compressed_id"];
  const std::vector<int32_t> tokens = {776, 12, 11, 13, 14, 776, 12, 11, 1023, 3, 4};
  for (size_t l = 0; l < 2; ++l) {
    const auto primes = m["primes"][l].get<std::vector<std::vector<int64_t>>>();
    const auto mult = m["multipliers"][l].get<std::vector<int64_t>>();
    for (size_t p = 0; p < tokens.size(); ++p) {
      int32_t ids[4];
      for (int i = 0; i < 4; ++i) ids[i] = int(p) - i >= 0 ? lookup[size_t(tokens[p - size_t(i)])] : pad;
      int64_t rows[6];
      (*hashes)[l].rows(ids, rows);
      int64_t offset = 0;
      for (int n = 2; n <= 4; ++n) {
        uint64_t x = 0;
        for (int i = 0; i < n; ++i) x ^= uint64_t(ids[i]) * uint64_t(mult[size_t(i)]);
        for (int h = 0; h < 2; ++h) {
          const int64_t prime = primes[size_t(n - 2)][size_t(h)];
          EXPECT_EQ(rows[(n - 2) * 2 + h], offset + int64_t(x % uint64_t(prime))) << l << " " << p << " " << n << " " << h;
          offset += prime;
        }
      }
    }
  }
}

}  // namespace
}  // namespace deepinfer
