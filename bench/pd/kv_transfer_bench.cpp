// KV transfer throughput of KvTransferAgent between two processes on this machine, as a decode
// worker pulls a prompt's blocks from a prefill worker: the child process registers a cache of one
// kind ([slabs][blocks][block_bytes], like KvCache) and sends its UCX address and rkey through a
// pipe; the parent reads `--blocks` blocks (every slab of each) per read() from it, `--iters` times,
// and reports bytes per second. UCX chooses the transport, as in the workers; compare with
//   ucx_perftest -t ucp_get -s BLOCK_BYTES -n N   (server)  and the same with 127.0.0.1 (client).
//
//   kv_transfer_bench [--block-bytes 73728] [--slabs 8] [--blocks 64] [--iters 50]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dist/pd/kv_transfer_agent.h"

using namespace deepinfer;
using namespace deepinfer::pd;

namespace {

struct Cache {
  std::vector<uint8_t> memory;
  KvCacheView view;
  KvLayout layout;
  Cache(size_t block_bytes, int slabs, int blocks, uint8_t fill) : memory(block_bytes * size_t(slabs) * size_t(blocks), fill) {
    KvKindView kind{blocks, block_bytes, {}};
    for (int s = 0; s < slabs; ++s) kind.slab_base.push_back(memory.data() + size_t(s) * size_t(blocks) * block_bytes);
    view.kinds.push_back(kind);
    layout.kinds.push_back({uint32_t(slabs), block_bytes, 0, uint32_t(blocks)});
  }
};

bool write_all(int fd, const std::string& s) {
  const uint64_t n = s.size();
  if (write(fd, &n, sizeof n) != ssize_t(sizeof n)) return false;
  return write(fd, s.data(), s.size()) == ssize_t(s.size());
}

bool read_all(int fd, std::string& s) {
  uint64_t n = 0;
  if (read(fd, &n, sizeof n) != ssize_t(sizeof n) || n > (1u << 20)) return false;
  s.resize(n);
  size_t got = 0;
  while (got < n) {
    const ssize_t r = read(fd, s.data() + got, n - got);
    if (r <= 0) return false;
    got += size_t(r);
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  size_t block_bytes = 73728;  // DeepSeek-V3: 64 tokens x 1152 B of bf16 latent per layer
  int slabs = 8, blocks = 64, iters = 50;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const long v = std::atol(argv[i + 1]);
    if (a == "--block-bytes") block_bytes = size_t(v);
    else if (a == "--slabs") slabs = int(v);
    else if (a == "--blocks") blocks = int(v);
    else if (a == "--iters") iters = int(v);
    else return std::fprintf(stderr, "unknown option %s\n", a.c_str()), 2;
  }
  int to_parent[2], to_child[2];
  if (pipe(to_parent) != 0 || pipe(to_child) != 0) return 1;
  const pid_t child = fork();
  if (child == 0) {  // the prefill side: registered memory, progress thread, nothing else
    Cache cache(block_bytes, slabs, blocks, 0x5a);
    auto agent = KvTransferAgent::create(cache.view);
    if (!agent.ok()) return std::fprintf(stderr, "child: %s\n", agent.status().message().c_str()), 1;
    const RemoteKind& k = (*agent)->remote_kinds()[0];
    write_all(to_parent[1], (*agent)->worker_address());
    write_all(to_parent[1], k.rkey);
    write_all(to_parent[1], std::string(reinterpret_cast<const char*>(&k.base), sizeof k.base));
    char done;
    (void)read(to_child[0], &done, 1);  // until the parent is finished
    return 0;
  }
  Cache cache(block_bytes, slabs, blocks, 0);
  auto agent = KvTransferAgent::create(cache.view);
  if (!agent.ok()) return std::fprintf(stderr, "parent: %s\n", agent.status().message().c_str()), 1;
  std::string address, rkey, base;
  if (!read_all(to_parent[0], address) || !read_all(to_parent[0], rkey) || !read_all(to_parent[0], base)) return 1;
  std::vector<RemoteKind> remote = {{0, rkey}};
  std::memcpy(&remote[0].base, base.data(), sizeof remote[0].base);
  std::vector<BlockRead> reads;
  for (int b = 0; b < blocks; ++b) reads.push_back({0, b, blocks - 1 - b});
  const double bytes = double(block_bytes) * slabs * blocks;
  std::vector<double> seconds;
  for (int i = 0; i < iters + 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const Status st = (*agent)->read(address, remote, cache.layout, reads, t0 + std::chrono::seconds(60));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!st.ok()) return std::fprintf(stderr, "read: %s\n", st.message().c_str()), 1;
    if (i >= 3) seconds.push_back(s);  // the first reads warm up connections and pages
  }
  if (cache.memory[0] != 0x5a || cache.memory.back() != 0x5a) return std::fprintf(stderr, "the bytes did not arrive\n"), 1;
  (void)write(to_child[1], "x", 1);
  waitpid(child, nullptr, 0);
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2];
  double total = 0;
  for (double s : seconds) total += s;
  std::printf("%d reads of %d blocks x %d slabs x %zu B (%.1f MiB each, one endpoint): median %.2f ms = %.0f MB/s, "
              "mean %.0f MB/s\n",
              iters, blocks, slabs, block_bytes, bytes / (1 << 20), median * 1e3, bytes / median / 1e6,
              bytes * double(seconds.size()) / total / 1e6);
  return 0;
}
