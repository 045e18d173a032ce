#include "dist/pd/pd_messages.h"

#include <gtest/gtest.h>

#include "dist/pd/kv_layout.h"

namespace deepinfer::pd {
namespace {

KvLayout layout() {
  return {"FakeCausalLM vocab 96 layers 2", 2, 4, {{2, 192, 0, 64}, {1, 96, 6, 16}}};
}

PrefillRequest request() {
  PrefillRequest m;
  m.transfer_id = 0x0123456789abcdefull;
  m.layout = layout();
  for (int i = 0; i < 13; ++i) m.tokens.push_back(i + 2);  // h = 3 blocks of 4, and one more
  m.wanted = {{0, 1}, {0, 2}, {1, 2}};
  return m;
}

PrefillGrant grant() {
  PrefillGrant m;
  m.transfer_id = request().transfer_id;
  m.lease_ms = 30000;
  m.layout = layout();
  m.worker_address = std::string("\x01\x02\x00\x03", 4);
  m.kinds = {{0x7f0000001000ull, "rkey-0"}, {0x7f0000100000ull, "rkey-1"}};
  m.blocks = {5, 63, 0};
  return m;
}

// Sets the little-endian u32 at `pos`.
void put_u32(std::string& s, size_t pos, uint32_t v) {
  for (int i = 0; i < 4; ++i) s[pos + size_t(i)] = char((v >> (8 * i)) & 0xff);
}

TEST(PdMessages, RoundTrips) {
  auto r = decode_prefill_request(encode(request()));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, request());
  auto g = decode_prefill_grant(encode(grant()));
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(*g, grant());
  auto rel = decode_release(encode(Release{42, 1}));
  ASSERT_TRUE(rel.ok());
  EXPECT_EQ(*rel, (Release{42, 1}));
  auto ack = decode_release_ack(encode(ReleaseAck{42, 0}));
  ASSERT_TRUE(ack.ok());
  EXPECT_EQ(*ack, (ReleaseAck{42, 0}));
}

TEST(PdMessages, HeaderIsMagicVersionTypeLittleEndian) {
  const std::string b = encode(Release{0x0102030405060708ull, 1});
  ASSERT_EQ(b.size(), 8u + 8u + 1u);
  EXPECT_EQ(b.substr(0, 4), "DIPD");
  EXPECT_EQ(b[4], 1);  // version 1, low byte first
  EXPECT_EQ(b[5], 0);
  EXPECT_EQ(b[6], 3);  // kRelease
  EXPECT_EQ(b[8], 0x08);
  EXPECT_EQ(b[15], 0x01);
}

TEST(PdMessages, EveryTruncationIsAnError) {
  for (const std::string& full : {encode(request()), encode(grant()), encode(Release{1, 0}), encode(ReleaseAck{1, 1})}) {
    for (size_t n = 0; n < full.size(); ++n) {
      const std::string_view cut(full.data(), n);
      EXPECT_FALSE(decode_prefill_request(cut).ok());
      EXPECT_FALSE(decode_prefill_grant(cut).ok());
      EXPECT_FALSE(decode_release(cut).ok());
      EXPECT_FALSE(decode_release_ack(cut).ok());
    }
  }
}

TEST(PdMessages, RejectsWrongMagicVersionTypeAndTrailingBytes) {
  std::string b = encode(request());
  std::string bad = b;
  bad[0] = 'X';
  EXPECT_NE(decode_prefill_request(bad).status().message().find("bad magic"), std::string::npos);
  bad = b;
  bad[4] = 2;
  EXPECT_NE(decode_prefill_request(bad).status().message().find("version 2"), std::string::npos);
  EXPECT_NE(decode_prefill_grant(b).status().message().find("message type 1"), std::string::npos);
  EXPECT_NE(decode_prefill_request(b + "x").status().message().find("1 trailing bytes"), std::string::npos);
  std::string rel = encode(Release{1, 1});
  rel.back() = 2;
  EXPECT_FALSE(decode_release(rel).ok());
}

TEST(PdMessages, RejectsHugeCountsBeforeAllocating) {
  // The token count sits after the header (8), transfer id (8) and the layout.
  const size_t layout_bytes = 4 + layout().model.size() + 1 + 4 + 4 + 2 * 20;
  const size_t tokens_at = 8 + 8 + layout_bytes;
  std::string b = encode(request());
  put_u32(b, tokens_at, 0xffffffffu);
  EXPECT_NE(decode_prefill_request(b).status().message().find("over the limit"), std::string::npos);
  put_u32(b, tokens_at, kMaxPromptTokens);  // within the limit, but not in the message
  EXPECT_NE(decode_prefill_request(b).status().message().find("bytes left"), std::string::npos);
  b = encode(request());
  put_u32(b, 8 + 8, 1u << 30);  // the model name's length
  EXPECT_FALSE(decode_prefill_request(b).ok());
  b = encode(request());
  put_u32(b, 8 + 8 + 4 + layout().model.size() + 1 + 4, kMaxKinds + 1);  // kinds
  EXPECT_NE(decode_prefill_request(b).status().message().find("layout.kinds"), std::string::npos);
}

TEST(PdMessages, CompatibilityNamesTheDifference) {
  EXPECT_TRUE(check_compatible(layout(), layout()).ok());
  KvLayout other = layout();
  other.kinds[0].n_blocks = 7;  // pool sizes may differ
  EXPECT_TRUE(check_compatible(layout(), other).ok());
  other.dtype = 0;
  EXPECT_NE(check_compatible(layout(), other).message().find("cache dtype"), std::string::npos);
  other = layout();
  other.block_size = 8;
  EXPECT_NE(check_compatible(layout(), other).message().find("block size"), std::string::npos);
  other = layout();
  other.kinds[1].bytes_per_block = 97;
  EXPECT_NE(check_compatible(layout(), other).message().find("kind 1's bytes per block"), std::string::npos);
  other = layout();
  other.model = "another";
  EXPECT_NE(check_compatible(layout(), other).message().find("model"), std::string::npos);
  other = layout();
  other.kinds.pop_back();
  EXPECT_FALSE(check_compatible(layout(), other).ok());
}

// A cached token's bytes depend on the activation dtype and, for DeepSeek-V2/V3, on how prompt
// rows attend (the provenance rule): workers that differ in either must not exchange KV.
TEST(PdMessages, LayoutsDifferWhereTheKvBytesWouldDiffer) {
  CausalLMInfo info;
  info.architecture = "DeepseekV3ForCausalLM";
  info.vocab_size = 96;
  info.n_layers = 2;
  info.kv_formulation = "prompt rows expanded";
  KvCacheInfo cache;
  cache.dtype = DType::BF16;
  cache.block_size = 4;
  const KvLayout base = kv_layout_of(info, cache);
  EXPECT_TRUE(check_compatible(base, kv_layout_of(info, cache)).ok());
  CausalLMInfo other = info;
  other.activation_dtype = DType::BF16;
  EXPECT_NE(check_compatible(base, kv_layout_of(other, cache)).message().find("model"), std::string::npos);
  other = info;
  other.kv_formulation = "every row absorbed";
  EXPECT_NE(check_compatible(base, kv_layout_of(other, cache)).message().find("model"), std::string::npos);
}

TEST(PdMessages, CheckRequestValidatesWantedBlocks) {
  EXPECT_TRUE(check_request(request(), layout()).ok());
  PrefillRequest m = request();
  m.wanted.push_back({0, 3});  // h is 3
  EXPECT_NE(check_request(m, layout()).message().find("outside"), std::string::npos);
  m = request();
  m.wanted.push_back({2, 0});
  EXPECT_NE(check_request(m, layout()).message().find("kind 2"), std::string::npos);
  m = request();
  m.wanted.push_back(m.wanted[0]);
  EXPECT_NE(check_request(m, layout()).message().find("twice"), std::string::npos);
  m = request();
  m.tokens.pop_back();
  EXPECT_FALSE(check_request(m, layout()).ok());
  m = request();
  m.tokens.resize(4);
  EXPECT_FALSE(check_request(m, layout()).ok());
  m = request();
  m.wanted.clear();
  EXPECT_FALSE(check_request(m, layout()).ok());
}

TEST(PdMessages, CheckGrantValidatesIdsAgainstThePrefillPool) {
  EXPECT_TRUE(check_grant(grant(), request(), layout()).ok());
  PrefillGrant g = grant();
  g.blocks[1] = 64;  // kind 0 has 64 blocks
  EXPECT_NE(check_grant(g, request(), layout()).message().find("block id 64"), std::string::npos);
  g = grant();
  g.blocks[2] = 16;  // kind 1 has 16
  EXPECT_FALSE(check_grant(g, request(), layout()).ok());
  g = grant();
  g.blocks[0] = -1;
  EXPECT_FALSE(check_grant(g, request(), layout()).ok());
  g = grant();
  g.blocks.pop_back();
  EXPECT_FALSE(check_grant(g, request(), layout()).ok());
  g = grant();
  g.transfer_id ^= 1;
  EXPECT_FALSE(check_grant(g, request(), layout()).ok());
  g = grant();
  g.kinds[0].base = UINT64_MAX - 10;
  EXPECT_NE(check_grant(g, request(), layout()).message().find("memory range"), std::string::npos);
  g = grant();
  g.kinds.pop_back();
  EXPECT_FALSE(check_grant(g, request(), layout()).ok());
  g = grant();
  g.layout.kinds[0].bytes_per_block = 1;
  EXPECT_FALSE(check_grant(g, request(), layout()).ok());
}

}  // namespace
}  // namespace deepinfer::pd
