// KvTransferAgent: two agents in one process, each over its own cache memory, read blocks from
// each other through UCX (whatever transport it picks here); a dead peer is an error within the
// deadline, never a hang.
#include "dist/pd/kv_transfer_agent.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

namespace deepinfer::pd {
namespace {

// A cache of two kinds laid out like KvCache: [n_slabs][n_blocks][bytes_per_block] per kind.
struct FakeCache {
  std::vector<std::vector<uint8_t>> memory;
  KvCacheView view;
  KvLayout layout;

  FakeCache(int n_blocks0, int n_blocks1, uint8_t seed) {
    view.block_size = 4;
    layout.model = "test";
    layout.block_size = 4;
    const int n_blocks[2] = {n_blocks0, n_blocks1};
    const int n_slabs[2] = {3, 1};
    const size_t bytes[2] = {4096, 1000};
    for (int k = 0; k < 2; ++k) {
      memory.emplace_back(size_t(n_slabs[k]) * size_t(n_blocks[k]) * bytes[k]);
      std::iota(memory.back().begin(), memory.back().end(), uint8_t(seed + 17 * k));
      KvKindView kind{n_blocks[k], bytes[k], {}};
      for (int s = 0; s < n_slabs[k]; ++s) kind.slab_base.push_back(memory.back().data() + size_t(s) * n_blocks[k] * bytes[k]);
      view.kinds.push_back(kind);
      layout.kinds.push_back({uint32_t(n_slabs[k]), bytes[k], 0, uint32_t(n_blocks[k])});
    }
  }
};

TEST(KvTransferAgent, ReadsEverySlabOfTheNamedBlocks) {
  FakeCache prefill(10, 6, 1), decode(7, 5, 100);
  auto a = KvTransferAgent::create(prefill.view);
  ASSERT_TRUE(a.ok()) << a.status().message();
  auto b = KvTransferAgent::create(decode.view);
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ((*a)->remote_kinds().size(), 2u);
  const std::vector<BlockRead> reads = {{0, 9, 0}, {0, 3, 6}, {1, 5, 2}, {1, 0, 4}};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  const Status st = (*b)->read((*a)->worker_address(), (*a)->remote_kinds(), prefill.layout, reads, deadline);
  ASSERT_TRUE(st.ok()) << st.message();
  for (const BlockRead& r : reads) {
    const KvKindView &from = prefill.view.kinds[r.kind], &to = decode.view.kinds[r.kind];
    for (size_t s = 0; s < from.slab_base.size(); ++s)
      EXPECT_EQ(0, std::memcmp(from.block(int(s), r.remote), to.block(int(s), r.local), from.bytes_per_block))
          << "kind " << r.kind << " slab " << s << " block " << r.remote;
  }
  // A block not read keeps its bytes.
  EXPECT_EQ(decode.view.kinds[0].block(0, 1)[0], uint8_t(100 + 4096 % 256));
  const TransferTotals t = (*b)->totals();
  EXPECT_EQ(t.n_reads, 1u);
  EXPECT_EQ(t.n_failed, 0u);
  EXPECT_EQ(t.n_blocks, 4u);
  EXPECT_EQ(t.n_bytes, 2u * 3 * 4096 + 2u * 1000);
}

TEST(KvTransferAgent, ADeadPeerIsAnErrorWithinTheDeadline) {
  FakeCache prefill(4, 4, 1), decode(4, 4, 2);
  auto b = KvTransferAgent::create(decode.view);
  ASSERT_TRUE(b.ok()) << b.status().message();
  std::string address;
  std::vector<RemoteKind> remote;
  {
    auto a = KvTransferAgent::create(prefill.view);
    ASSERT_TRUE(a.ok()) << a.status().message();
    address = (*a)->worker_address();
    remote = (*a)->remote_kinds();
  }
  const std::vector<BlockRead> reads = {{0, 1, 1}};
  const auto start = std::chrono::steady_clock::now();
  const Status st = (*b)->read(address, remote, prefill.layout, reads, start + std::chrono::seconds(5));
  EXPECT_FALSE(st.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  EXPECT_EQ((*b)->totals().n_failed, 1u);
}

TEST(KvTransferAgent, AnEndpointServesManyReadsAndAFailedPeerIsReplaced) {
  FakeCache decode(8, 8, 2);
  auto b = KvTransferAgent::create(decode.view);
  ASSERT_TRUE(b.ok()) << b.status().message();
  const std::vector<BlockRead> reads = {{0, 1, 1}, {1, 3, 0}};
  const auto deadline = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(30); };
  auto expect_copied = [&](const FakeCache& from) {
    EXPECT_EQ(0, std::memcmp(from.view.kinds[0].block(2, 1), decode.view.kinds[0].block(2, 1), 4096));
    EXPECT_EQ(0, std::memcmp(from.view.kinds[1].block(0, 3), decode.view.kinds[1].block(0, 0), 1000));
  };
  std::string address;
  std::vector<RemoteKind> remote;
  {
    FakeCache prefill(4, 4, 50);
    auto a = KvTransferAgent::create(prefill.view);
    ASSERT_TRUE(a.ok()) << a.status().message();
    address = (*a)->worker_address();
    remote = (*a)->remote_kinds();
    for (int i = 0; i < 3; ++i) {
      prefill.memory[0][4096 * 4 * 2 + 4096 + 7] = uint8_t(i);  // kind 0, slab 2, block 1 changes between reads
      ASSERT_TRUE((*b)->read(address, remote, prefill.layout, reads, deadline()).ok());
      expect_copied(prefill);
    }
  }
  FakeCache gone(4, 4, 0);
  EXPECT_FALSE((*b)->read(address, remote, gone.layout, reads, deadline()).ok());
  FakeCache restarted(4, 4, 90);
  auto a2 = KvTransferAgent::create(restarted.view);
  ASSERT_TRUE(a2.ok()) << a2.status().message();
  ASSERT_TRUE((*b)->read((*a2)->worker_address(), (*a2)->remote_kinds(), restarted.layout, reads, deadline()).ok());
  expect_copied(restarted);
  EXPECT_EQ((*b)->totals().n_failed, 1u);
}

}  // namespace
}  // namespace deepinfer::pd
