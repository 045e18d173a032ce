// DeepSeek-V4 loading and its parts on their own: the published config form (errors name the
// field), the fixtures' tensors bound by published name (errors name the file and tensor), the
// FP4/FP8 dequantization rules of the fixtures' README, the Sinkhorn normalization, and the
// cache layout's arithmetic.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "model/deepseek_v4/block_scaled_weights.h"
#include "model/deepseek_v4/cache_slots.h"
#include "model/deepseek_v4/compressor.h"
#include "model/deepseek_v4/sqrtsoftplus_router.h"
#include "model/deepseek_v4/hyper_connection.h"
#include "model/deepseek_v4/indexer.h"
#include "model/deepseek_v4/model.h"
#include "model/loader.h"
#include "safetensors_writer.h"

namespace deepinfer {
namespace {

nlohmann::json fixture_config(const std::string& model) {
  return nlohmann::json::parse(read_text_file("tests/data/models/" + model + "/config.json").value());
}

std::string config_error(const nlohmann::json& j) {
  auto c = DeepseekV4Config::FromJson(j, "config.json");
  EXPECT_FALSE(c.ok());
  return c.ok() ? "" : c.status().message();
}

TEST(DeepseekV4Config, ThePublishedFormParses) {
  auto c = DeepseekV4Config::FromJson(fixture_config("tiny-v4-fp8"), "config.json");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->compress_ratios, (std::vector<int>{0, 4, 128, 4, 0}));
  EXPECT_EQ(c->num_hash_layers, 1);
  EXPECT_EQ(c->sliding_window, 16);
  EXPECT_TRUE(c->quant.enabled);
  EXPECT_TRUE(c->rope_scaling.yarn);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 256);
  EXPECT_DOUBLE_EQ(c->compress_rope_theta, 160000);
  EXPECT_DOUBLE_EQ(c->swiglu_limit, 2.0);
}

TEST(DeepseekV4Config, UnknownAndMalformedFieldsAreNamed) {
  auto j = fixture_config("tiny-v4");
  j["engram_layers"] = {1, 2};
  EXPECT_NE(config_error(j).find("field 'engram_layers' is not known"), std::string::npos);
  j = fixture_config("tiny-v4");
  j["compress_ratios"] = {0, 4, 128, 4};
  EXPECT_NE(config_error(j).find("'compress_ratios' must list 5 integers"), std::string::npos);
  j = fixture_config("tiny-v4");
  j["scoring_func"] = "sigmoid";
  EXPECT_NE(config_error(j).find("scoring_func 'sigmoid' is not supported"), std::string::npos);
  j = fixture_config("tiny-v4-fp8");
  j["quantization_config"]["scale_fmt"] = "f32";
  EXPECT_NE(config_error(j).find("scale_fmt 'f32' is not supported"), std::string::npos);
  j = fixture_config("tiny-v4");
  j["o_groups"] = 3;
  EXPECT_NE(config_error(j).find("divisible by o_groups"), std::string::npos);
  j = fixture_config("tiny-v4");
  j["hc_mult"] = 65;
  EXPECT_NE(config_error(j).find("hc_mult > 64 is not supported"), std::string::npos);
}

TEST(DeepseekV4Weights, FixturesLoadByArchitecture) {
  for (const std::string name : {"tiny-v4", "tiny-v4-fp8"}) {
    auto m = load_causal_lm("tests/data/models/" + name);
    ASSERT_TRUE(m.ok()) << m.status().message();
    EXPECT_EQ((*m)->info().architecture, "DeepseekV4ForCausalLM");
    EXPECT_EQ((*m)->info().n_layers, 4);
    const auto& w = static_cast<const DeepseekV4Model&>(**m).weights();
    EXPECT_EQ(w.mtp.size(), 1u);  // loaded and set aside
    EXPECT_TRUE(w.layers[0].router.hashed());
    EXPECT_FALSE(w.layers[1].router.hashed());
    EXPECT_EQ(w.layers[2].attn.compressor.ratio, 128);
    EXPECT_EQ(w.layers[1].attn.indexer.topk, 4);
    EXPECT_EQ(w.layers[1].attn.wo_a.size(), 2u);
  }
}

// With bf16 activations, every linear of the published fp8 layout takes bf16 inputs: the fp8
// projections (128-column blocks), the FP4 experts and the bf16 head; the router does not.
TEST(DeepseekV4Weights, Bf16ActivationsReachFp8AndFp4Linears) {
  ModelOptions options;
  options.activation_dtype = DType::BF16;
  auto m = load_causal_lm("tests/data/models/tiny-v4-fp8", options);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const DeepseekV4Weights& w = static_cast<const DeepseekV4Model&>(**m).weights();
  const V4BlockWeights& b = w.layers[1];
  ASSERT_EQ(b.attn.wq_b.dtype, DType::F8_E4M3);
  ASSERT_EQ(b.experts[3].w1.dtype, DType::F4_E2M1);
  for (const LinearWeight* lw : {&b.attn.wq_a, &b.attn.wq_b, &b.attn.wkv, &b.attn.wo_b, &b.attn.wo_a[1],
                                 &b.experts[3].w1, &b.experts[3].w2, &b.shared.w3, &w.head})
    EXPECT_EQ(lw->act_dtype, DType::BF16);
  EXPECT_EQ(b.gate.act_dtype, DType::F32);
}

// Relaid weights (fp8 projections tile-major where they run on weight tiles, AMX or AVX-512 BF16;
// FP4 experts too on AMX, beside the relaid fp8 shared expert elsewhere) give the logits of the
// weights as stored, bit for bit: a 40-token prompt in chunks of 3 (the compressors and the indexer
// run), then decode steps of one token. Skipped where the CPU level relays nothing.
TEST(DeepseekV4Weights, RelaidWeightsGiveTheStoredWeightsBits) {
  ModelOptions with, without;
  with.activation_dtype = without.activation_dtype = DType::BF16;
  without.relay_weights = false;
  auto a = load_causal_lm("tests/data/models/tiny-v4-fp8", with);
  auto b = load_causal_lm("tests/data/models/tiny-v4-fp8", without);
  ASSERT_TRUE(a.ok() && b.ok());
  const V4BlockWeights& la = static_cast<const DeepseekV4Model&>(**a).weights().layers[1];
  const V4BlockWeights& lb = static_cast<const DeepseekV4Model&>(**b).weights().layers[1];
  EXPECT_FALSE(lb.attn.wq_b.tile_major);
  EXPECT_EQ((*b)->info().n_relaid_bytes, 0u);
  if (!la.attn.wq_b.tile_major) GTEST_SKIP() << "this CPU level keeps fp8 and FP4 weights as stored";
  EXPECT_GE((*a)->info().n_relaid_bytes, cpu_backend().relaid_bytes(lb.attn.wq_b) + cpu_backend().relaid_bytes(lb.shared.w3));
  for (const LinearWeight* lw : {&la.attn.wo_b, &la.attn.wo_a[1], &la.shared.w3}) EXPECT_TRUE(lw->tile_major);
  // The FP4 experts are relaid exactly where the backend relays FP4 weights (amx).
  const bool relays_fp4 = cpu_backend().relaid_bytes(lb.experts[3].w1) > 0;
  EXPECT_EQ(la.experts[3].w1.tile_major, relays_fp4);
  EXPECT_EQ(la.experts[3].w2.tile_major, relays_fp4);
  const int vocab = (*a)->info().vocab_size, block_size = 16, L = 48;
  const int n_blocks = (L + block_size - 1) / block_size;
  std::vector<int32_t> table(static_cast<size_t>(n_blocks));
  for (int i = 0; i < n_blocks; ++i) table[size_t(i)] = i;
  struct Cache {
    std::vector<std::vector<uint8_t>> memory;
    KvCacheView view{DType::BF16, 16, {}};
  } caches[2];
  std::array<const int32_t*, kMaxKvKinds> tables{};
  for (int i = 0; i < 2; ++i) {
    auto kinds = (i == 0 ? *a : *b)->kv_kinds(DType::BF16, block_size);
    ASSERT_TRUE(kinds.ok());
    for (size_t k = 0; k < kinds->size(); ++k) {
      KvKindView& v = caches[i].view.kinds.emplace_back();
      v.n_blocks = n_blocks;
      v.bytes_per_block = (*kinds)[k].bytes_per_block;
      v.slab_base.push_back(caches[i].memory.emplace_back((*kinds)[k].bytes_per_block * size_t(n_blocks)).data());
      tables[k] = table.data();
    }
  }
  std::vector<float> got(static_cast<size_t>(vocab)), want(static_cast<size_t>(vocab));
  for (int begin = 0; begin < L;) {
    const int end = std::min(L, begin + (begin < 40 ? 3 : 1));
    ForwardBatch fb;
    fb.seqs = {BatchSequence{0, end - begin, end, tables}};
    for (int p = begin; p < end; ++p) {
      fb.token_ids.push_back(int32_t((p * 37 + 11) % vocab));
      fb.positions.push_back(p);
      fb.prompt_rows.push_back(p < 40 ? 1 : 0);
    }
    fb.logit_rows = {end - begin - 1};
    (*a)->forward(fb, caches[0].view, got.data());
    (*b)->forward(fb, caches[1].view, want.data());
    ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0) << "tokens " << begin << ".." << end;
    begin = end;
  }
}

// The fixture's checkpoint with one tensor's header entry changed (same byte length).
std::string error_with(const std::string& model, const std::string& tensor, const nlohmann::json& change) {
  const std::string src = "tests/data/models/" + model;
  const std::string bytes = read_text_file(src + "/model.safetensors").value();
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[size_t(i)])) << (8 * i);
  auto header = nlohmann::json::parse(bytes.substr(8, n));
  if (change.is_string()) {
    header[change.get<std::string>()] = header[tensor];
    header.erase(tensor);
  } else {
    header[tensor].update(change);
  }
  testing::TempDir dir("v4-weights");
  testing::write_file(dir.path() / "config.json", read_text_file(src + "/config.json").value());
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  testing::write_file(dir.path() / "model.safetensors", testing::safetensors_image(text, bytes.substr(8 + n)));
  auto m = load_causal_lm(dir.path().string());
  EXPECT_FALSE(m.ok());
  return m.ok() ? "" : m.status().message();
}

TEST(DeepseekV4Weights, BrokenTensorsAreNamed) {
  std::string e = error_with("tiny-v4", "layers.2.attn.compressor.ape", nlohmann::json("layers.2.attn.compressor.bias"));
  EXPECT_NE(e.find("tensor 'layers.2.attn.compressor.ape' is missing"), std::string::npos) << e;
  e = error_with("tiny-v4", "layers.1.attn.wkv.weight", {{"shape", {64, 256}}});
  EXPECT_NE(e.find("model.safetensors: tensor 'layers.1.attn.wkv.weight' (BF16) has shape [64, 256], expected [128, 128]"),
            std::string::npos)
      << e;
  e = error_with("tiny-v4-fp8", "layers.1.ffn.experts.3.w2.scale", {{"dtype", "I8"}});
  EXPECT_NE(e.find("tensor 'layers.1.ffn.experts.3.w2.scale' must be F8_E8M0, is I8"), std::string::npos) << e;
  e = error_with("tiny-v4-fp8", "layers.0.attn.wq_b.weight", {{"dtype", "I8"}});
  EXPECT_NE(e.find("tensor 'layers.0.attn.wq_b.weight' must be BF16, F16, F32 or F8_E4M3, is I8"), std::string::npos) << e;
}

// FP4 experts stay packed in the mapping (4.25 bits per weight); a NaN scale byte is refused,
// named with the tensor and its place.
TEST(DeepseekV4Weights, Fp4ExpertsStayPackedAndNanScalesAreNamed) {
  {
    auto m = load_causal_lm("tests/data/models/tiny-v4-fp8");
    ASSERT_TRUE(m.ok()) << m.status().message();
    const ExpertWeights& e = static_cast<const DeepseekV4Model&>(**m).weights().layers[1].experts[3];
    EXPECT_EQ(e.w2.dtype, DType::F4_E2M1);
    EXPECT_NE(e.w2.scale_e8m0, nullptr);
    EXPECT_EQ(e.w2.n_in % 32, 0);
  }
  const std::string src = "tests/data/models/tiny-v4-fp8";
  std::string bytes = read_text_file(src + "/model.safetensors").value();
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(bytes[size_t(i)])) << (8 * i);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  const auto& scale = header["layers.1.ffn.experts.3.w2.scale"];
  const int64_t cols = scale["shape"][1].get<int64_t>();
  bytes[size_t(8 + n + scale["data_offsets"][0].get<uint64_t>() + 2 * cols + 1)] = char(0xff);  // [2, 1]
  testing::TempDir dir("v4-nan-scale");
  testing::write_file(dir.path() / "config.json", read_text_file(src + "/config.json").value());
  testing::write_file(dir.path() / "model.safetensors", bytes);
  auto m = load_causal_lm(dir.path().string());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("model.safetensors: tensor 'layers.1.ffn.experts.3.w2.scale' holds the NaN scale "
                                      "0xff at [2, 1]"),
            std::string::npos)
      << m.status().message();
}

// Expected values by the README's rule: nibble (low first) -> E2M1 table, times 2^(e - 127).
TEST(BlockScaledWeights, Fp4NibblesAndUe8m0Scales) {
  std::vector<uint8_t> packed(16), scales = {127 + 2};  // one row of 32 inputs, scale 4
  packed[0] = 0x71;                                      // j=0: nibble 1 (0.5), j=1: nibble 7 (6)
  packed[1] = 0xF8;                                      // j=2: nibble 8 (-0), j=3: nibble 15 (-6)
  packed[15] = 0x2D;                                     // j=30: nibble 13 (-3), j=31: nibble 2 (1)
  std::vector<float> out(32);  // as the kernels read an F4_E2M1 weight (tests/kernels/fp4_gemm_test.cpp)
  for (int j = 0; j < 32; ++j) out[size_t(j)] = fp4_e2m1_at(packed.data(), j) * ue8m0_to_f32(scales[0]);
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[1], 24.0f);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_TRUE(std::signbit(out[2]));
  EXPECT_EQ(out[3], -24.0f);
  EXPECT_EQ(out[4], 0.0f);
  EXPECT_EQ(out[30], -12.0f);
  EXPECT_EQ(out[31], 4.0f);
  float s[3];
  const uint8_t e[3] = {127, 0, 134};
  ue8m0_to_f32(e, 3, s);
  EXPECT_EQ(s[0], 1.0f);
  EXPECT_EQ(s[1], std::ldexp(1.0f, -127));
  EXPECT_EQ(s[2], 128.0f);
}

// Sinkhorn-normalized mixing: after 20 iterations every row and column of comb sums to ~1
// (the manifold the method constrains the residual mixing to).
TEST(HyperConnection, CombIsDoublyStochastic) {
  const int hc = 4;
  const int64_t hidden = 8;
  HyperConnectionWeights w;
  std::vector<float> fn(size_t((2 + hc) * hc * hc * hidden));
  for (size_t i = 0; i < fn.size(); ++i) fn[i] = std::sin(float(i) * 0.37f);
  w.fn = LinearWeight{DType::F32, fn.data(), (2 + hc) * hc, hc * hidden, nullptr, 128, 128};
  w.base.assign(size_t((2 + hc) * hc), 0.1f);
  w.scale = {1.0f, 1.0f, 1.0f};
  std::vector<float> streams(static_cast<size_t>(hc * hidden)), y(static_cast<size_t>(hidden)), post(hc), comb(hc * hc), mixes(64);
  for (size_t i = 0; i < streams.size(); ++i) streams[i] = std::cos(float(i));
  const HyperConnectionDims d{hc, hidden, 20, 1e-6f, 1e-6f};
  hc_pre(cpu_backend(), w, d, streams.data(), 1, y.data(), post.data(), comb.data(), mixes.data());
  for (int j = 0; j < hc; ++j) {
    float row = 0, col = 0;
    for (int k = 0; k < hc; ++k) row += comb[size_t(j * hc + k)], col += comb[size_t(k * hc + j)];
    EXPECT_NEAR(row, 1.0f, 1e-3f);
    EXPECT_NEAR(col, 1.0f, 1e-5f);
    EXPECT_GT(post[size_t(j)], 0.0f);
    EXPECT_LT(post[size_t(j)], 2.0f);
  }
}

// The cache layout's arithmetic at V4-Flash sizes (head_dim 512, rope 64, index_head_dim 128,
// window 128), one layer of each ratio, 128-token blocks. What grows with the context is the
// compressed kind: per CSA layer one entry and one indexer key per 4 tokens, per HCA layer one
// entry per 128 tokens. bf16: entries 512 x 2 = 1024 B, keys 256 B: 256 + 64 + 8 = 328 B/token.
// fp8: entries 448 e4m3 + 4 f32 scales + 64 bf16 rope dims = 592 B, keys 128 + 4 = 132 B
// (DeepSeek's own kernels keep 583 B entries with UE8M0 scales per 64 and FP4 keys of 68 B).
TEST(V4CacheSlots, KvBytesPerTokenAtV4FlashSizes) {
  for (const DType t : {DType::BF16, DType::F8_E4M3}) {
    auto s = V4CacheSlots::make({0, 4, 128}, 512, 64, 128, 128, t, 128);
    ASSERT_TRUE(s.ok()) << s.status().message();
    const bool fp8 = t == DType::F8_E4M3;
    const size_t entry = fp8 ? 448 + 4 * 4 + 128 : 1024, key = fp8 ? 128 + 4 : 256;
    const size_t kv = fp8 ? 512 + 4 * 4 + 128 : (512 + 64) * 2;  // per token: the window's K=V (nope part aligned to 128)
    const size_t hca_inputs = fp8 ? 1024 + 8 * 4 : 1024 * 2;      // wkv x, wgate x + ape: 512 + 512
    const size_t csa_inputs = fp8 ? 2560 + 20 * 4 : 2560 * 2;     // 2 x 1024 + indexer 2 x 256
    ASSERT_EQ(s->kinds.size(), 3u);
    EXPECT_EQ(s->kinds[0].lookback, 127);  // K=V of every layer and the ratio-128 inputs
    EXPECT_EQ(s->kinds[0].bytes_per_block, 128 * (3 * kv + hca_inputs));
    EXPECT_EQ(s->kinds[1].lookback, 7);  // the ratio-4 inputs: two overlapping groups
    EXPECT_EQ(s->kinds[1].bytes_per_block, 128 * csa_inputs);
    EXPECT_EQ(s->kinds[2].lookback, 0);
    EXPECT_EQ(s->kinds[2].bytes_per_block, 32 * (entry + key) + entry);
    EXPECT_DOUBLE_EQ(kv_bytes_per_token(s->kinds, 128), double(entry + key) / 4 + double(entry) / 128);
    EXPECT_EQ(kv_bytes_per_sequence_window(s->kinds, 128), 2 * 128 * (3 * kv + hca_inputs) + 2 * 128 * csa_inputs);
  }
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(V4CacheSlots::make({0, 4, 128}, 512, 64, 128, 128, DType::BF16, 128)->kinds, 128),
                   328.0);
}

// Where the state sits: group g of a ratio-r layer in the block of its last token; blocks that
// neither divide nor are divided by a ratio are refused.
TEST(V4CacheSlots, CompressedEntriesLiveInTheBlockOfTheirGroupsLastToken) {
  auto s = V4CacheSlots::make({0, 4, 128, 4}, 128, 64, 64, 16, DType::F32, 64);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->kinds.size(), 4u);  // window 16, ratio-4 inputs, ratio-128 inputs, compressed
  EXPECT_EQ(s->compressed_kind, 3);
  EXPECT_EQ(s->layers[1].slots_per_block, 16);
  EXPECT_EQ(s->layers[2].slots_per_block, 1);
  std::vector<uint8_t> window(4096), mem(size_t(s->kinds[3].bytes_per_block) * 4);
  KvCacheView view{DType::F32, 64, {}};
  for (int k = 0; k < 3; ++k) view.kinds.push_back({1, s->kinds[size_t(k)].bytes_per_block, {window.data()}});
  view.kinds.push_back({4, s->kinds[3].bytes_per_block, {mem.data()}});
  const int32_t table[4] = {3, 1, 0, 2};
  BatchSequence seq{0, 1, 256, {table, table, table, table}};
  const size_t block = s->kinds[3].bytes_per_block;
  // Ratio 128: group 0 ends at token 127, in table block 1 (id 1); group 1 in table block 3 (id 2).
  EXPECT_EQ(s->compressed_entry(view, seq, 2, 0), mem.data() + 1 * block + s->layers[2].entry_offset);
  EXPECT_EQ(s->compressed_entry(view, seq, 2, 1), mem.data() + 2 * block + s->layers[2].entry_offset);
  // Ratio 4: group 17 (tokens 68..71) in table block 1, slot 1.
  const size_t entry = s->layers[1].entry.bytes_per_token();
  EXPECT_EQ(s->compressed_entry(view, seq, 1, 17), mem.data() + 1 * block + s->layers[1].entry_offset + entry);
  EXPECT_EQ(s->index_key(view, seq, 3, 17),
            mem.data() + 1 * block + s->layers[3].key_offset + s->layers[3].key.bytes_per_token());
  auto bad = V4CacheSlots::make({0, 4, 128}, 128, 64, 64, 16, DType::BF16, 48);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("block size 48"), std::string::npos);
  EXPECT_FALSE(V4CacheSlots::make({0, 4}, 128, 64, 64, 16, DType::F16, 64).ok());
}

// Pooling by the README's rule, on values small enough to compute by hand: ratio 4 with overlap,
// dim 1 (coff 2: column 0 is the previous window's series, column 1 the current one's).
TEST(Compressor, OverlappingPoolIsASoftmaxOverEightSlots) {
  CompressorWeights w;
  w.ratio = 4;
  w.dim = 1;
  w.overlap = true;
  // tokens of window w-1 then window w: [kv0, kv1] and [score0, score1] per token.
  const float kv[16] = {1, 100, 2, 100, 3, 100, 4, 100, 100, 5, 100, 6, 100, 7, 100, 8};
  const float score[16] = {0, 9, 0, 9, 0, 9, std::log(2.0f), 9, 9, 0, 9, 0, 9, 0, 9, std::log(3.0f)};
  float entry = 0;
  compressor_pool(w, kv, score, 4, &entry);
  // weights e^score over the 8 slots: 1, 1, 1, 2 (values 1..4) and 1, 1, 1, 3 (values 5..8).
  EXPECT_NEAR(entry, (1 + 2 + 3 + 2 * 4 + 5 + 6 + 7 + 3 * 8) / 11.0f, 1e-5f);
  compressor_pool(w, kv + 8, score + 8, 0, &entry);  // window 0: only its own 4 slots
  EXPECT_NEAR(entry, (5 + 6 + 7 + 3 * 8) / 6.0f, 1e-5f);
}

// sqrtsoftplus routing by the README's rule: choice by s + bias, weights from s alone, normalized
// and scaled; hash layers take tid2eid's experts.
TEST(SqrtSoftplusRouter, BiasChoosesScoresWeigh) {
  SqrtSoftplusRouter r;
  r.n_experts = 4;
  r.top_k = 2;
  r.routed_scaling_factor = 1.5f;
  r.bias = {0.0f, 10.0f, 0.0f, 0.0f};
  const float logits[4] = {3.0f, -2.0f, 1.0f, 0.0f};
  int32_t ids[2];
  float weights[2];
  r.route(logits, 0, ids, weights);
  auto s = [](float x) { return std::sqrt(std::log1p(std::exp(x))); };
  EXPECT_EQ(ids[0], 1);  // the bias wins the choice
  EXPECT_EQ(ids[1], 0);
  EXPECT_NEAR(weights[0], s(-2) / (s(-2) + s(3)) * 1.5f, 1e-6f);
  EXPECT_NEAR(weights[1], s(3) / (s(-2) + s(3)) * 1.5f, 1e-6f);
  r.bias.clear();
  r.tid2eid = {2, 3, 3, 0};  // token 1 -> experts 3, 0
  r.route(logits, 1, ids, weights);
  EXPECT_EQ(ids[0], 3);
  EXPECT_EQ(ids[1], 0);
  EXPECT_NEAR(weights[0] + weights[1], 1.5f, 1e-6f);
}

// The indexer by the README's formula, on one head of width 2 with hand-picked keys: ReLU drops
// negative products, the top-k are the best scores (a tie goes to the lower index), returned in
// increasing entry order; with no more entries than top-k, all of them.
TEST(Indexer, TopKOfWeightedReluScores) {
  IndexerWeights w;
  w.n_heads = 1;
  w.head_dim = 2;
  w.topk = 2;
  const float q[2] = {1.0f, 0.0f}, head_weight[1] = {1.0f};
  const float keys[10] = {-5, 0, 2, 0, 3, 9, 2, 1, 1, 0};  // q . key = -5 (-> 0), 2, 3, 2, 1
  int32_t selected[5];
  std::vector<float> dots, scores;
  ASSERT_EQ(indexer_select(cpu_backend(), w, q, head_weight, keys, 5, selected, dots, scores), 2);
  EXPECT_EQ(selected[0], 1);  // score 2 at entries 1 and 3: the lower index
  EXPECT_EQ(selected[1], 2);  // score 3
  ASSERT_EQ(indexer_select(cpu_backend(), w, q, head_weight, keys, 2, selected, dots, scores), 2);
  EXPECT_EQ(selected[0], 0);
  EXPECT_EQ(selected[1], 1);
}

}  // namespace
}  // namespace deepinfer
