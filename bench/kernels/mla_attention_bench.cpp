// MLA decode attention at V2-Lite shapes (16 heads, latent 512, rope 64): n_seqs sequences of
// ctx cached tokens each, one new row per sequence. bytes_per_second counts cache bytes read.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/mla_attention.h"

namespace deepinfer {
namespace {

// args: cache dtype (0 bf16, 1 fp8), n_seqs, ctx, dot dtype (0 f32, 1 bf16)
void BM_MlaDecode(benchmark::State& state) {
  const DType t = state.range(0) == 0 ? DType::BF16 : DType::F8_E4M3;
  const int n_seqs = int(state.range(1)), ctx = int(state.range(2));
  const DType dots = state.range(3) == 0 ? DType::F32 : DType::BF16;
  const int H = 16, c = 512, rd = 64, block = 64;
  MlaCacheLayout layout{t, c, rd};
  const int per_seq = (ctx + block - 1) / block;
  std::vector<uint8_t> cache(size_t(per_seq) * n_seqs * block * layout.bytes_per_token());
  std::mt19937 rng(1);
  for (auto& b : cache) b = uint8_t(rng() & 0x3f);  // small finite values for every layout
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(n_seqs));
  ForwardBatch batch;
  for (int s = 0; s < n_seqs; ++s) {
    for (int b = 0; b < per_seq; ++b) tables[size_t(s)].push_back(b * n_seqs + s);
    batch.seqs.push_back({int32_t(s), 1, int32_t(ctx), {tables[size_t(s)].data()}});
    batch.token_ids.push_back(0);
    batch.positions.push_back(ctx - 1);
  }
  std::vector<float> q_lat(size_t(n_seqs) * H * c, 0.01f), q_pe(size_t(n_seqs) * H * rd, 0.01f),
      out(size_t(n_seqs) * H * c);
  MlaAttentionParams p;
  p.q_latent = q_lat.data();
  p.q_pe = q_pe.data();
  p.ld_q_pe_row = H * rd;
  p.ld_q_pe_head = rd;
  p.out_latent = out.data();
  p.n_heads = H;
  p.softmax_scale = 0.1f;
  p.batch = &batch;
  p.cache = cache.data();
  p.layout = layout;
  p.block_size = block;
  p.dot_dtype = dots;
  for (auto _ : state) cpu::mla_attention(p);
  state.SetBytesProcessed(int64_t(state.iterations()) * n_seqs * ctx * int64_t(layout.bytes_per_token()));
  const double flops = 2.0 * n_seqs * double(ctx) * H * (c + rd + c);
  state.counters["GFLOPs"] = benchmark::Counter(flops * double(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_MlaDecode)
    ->ArgNames({"fp8", "seqs", "ctx", "bf16dots"})
    ->ArgsProduct({{0, 1}, {1, 32}, {512, 4096}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace deepinfer
