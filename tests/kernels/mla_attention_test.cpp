// MLA attention over the paged latent cache: against a scalar softmax reference for every cache
// dtype and ISA, and bitwise per-row invariance (a row alone on one thread equals the same row
// in a mixed decode + prefill batch on many threads); also with bf16 dots over a bf16 or fp8 cache,
// against the reference on bf16-rounded queries (and fp8 latents rounded to bf16), within the
// weights' bf16 rounding, and an fp8 cache's bits against the bf16 cache of its rounded entries. Three cache
// shapes: entries that are not whole 32-element chunks, entries that are (read in place by the
// amx level's tiles) with more heads than two tiles, and pages that 16-key tiles straddle.
#include <gtest/gtest.h>

#include <cstring>
#include <tuple>

#include "kernel_test_util.h"
#include "kernels/cpu/mla_attention.h"

namespace deepinfer::test {
namespace {

struct Shape {
  int c, rope, heads, block;
};
// Entries of 112 elements (not whole chunks of 32); of 96 with 40 heads (three head tiles, split
// between two tasks when a row runs alone on one thread); of 64 in pages of 24 positions.
constexpr Shape kShapes[] = {{96, 16, 5, 16}, {64, 32, 40, 16}, {48, 16, 3, 24}};

struct CacheFixture {
  int kC, kRope, kBlock;
  MlaCacheLayout layout;
  std::vector<uint8_t> cache;
  std::vector<std::vector<int32_t>> tables;
  std::vector<int32_t> n_ctx = {3, 70, 150, 65};  // tokens cached per sequence
  std::vector<int32_t> n_new = {1, 1, 12, 65};    // rows this step: decodes, a chunk, a whole prompt

  CacheFixture(DType dtype, const Shape& shape)
      : kC(shape.c), kRope(shape.rope), kBlock(shape.block), layout{dtype, kC, kRope} {
    int n_blocks = 0;
    for (int32_t n : n_ctx) n_blocks += (n + kBlock - 1) / kBlock;
    cache.resize(size_t(n_blocks) * kBlock * layout.bytes_per_token());
    // Block ids assigned backwards so tables are not contiguous.
    int next = n_blocks;
    for (int32_t n : n_ctx) {
      tables.emplace_back();
      for (int b = 0; b < (n + kBlock - 1) / kBlock; ++b) tables.back().push_back(--next);
    }
    // Fill every position of every sequence through the store kernel.
    for (size_t s = 0; s < n_ctx.size(); ++s) {
      ForwardBatch b;
      for (int32_t p = 0; p < n_ctx[s]; ++p) {
        b.token_ids.push_back(0);
        b.positions.push_back(p);
      }
      b.seqs.push_back({0, n_ctx[s], n_ctx[s], {tables[s].data()}});
      const std::vector<float> lat = random_floats(size_t(n_ctx[s]) * kC, 50 + uint32_t(s));
      const std::vector<float> pe = random_floats(size_t(n_ctx[s]) * kRope, 60 + uint32_t(s));
      cpu::mla_kv_store({lat.data(), kC, pe.data(), kRope, &b, cache.data(), layout, kBlock});
    }
  }

  // The batch of the given sequences' new rows.
  ForwardBatch batch(const std::vector<size_t>& seqs) const {
    ForwardBatch b;
    for (size_t s : seqs) {
      b.seqs.push_back({int32_t(b.n_rows()), n_new[s], n_ctx[s], {tables[s].data()}});
      for (int32_t i = 0; i < n_new[s]; ++i) {
        b.token_ids.push_back(0);
        b.positions.push_back(n_ctx[s] - n_new[s] + i);
      }
    }
    return b;
  }

  // Cached key of sequence s at position t, as the kernel must read it: latent then rope part (with
  // bf16 dots an fp8 latent rounded to bf16 once dequantized).
  std::vector<float> key(size_t s, int32_t t, DType dot = DType::F32) const {
    const uint8_t* e = cache.data() +
                       (size_t(tables[s][size_t(t / kBlock)]) * kBlock + size_t(t % kBlock)) * layout.bytes_per_token();
    std::vector<float> k(kC + kRope);
    if (layout.dtype == DType::F32) {
      std::memcpy(k.data(), e, k.size() * 4);
    } else if (layout.dtype == DType::BF16) {
      for (int i = 0; i < kC + kRope; ++i) k[size_t(i)] = bf16_to_f32(reinterpret_cast<const uint16_t*>(e)[i]);
    } else {
      const int groups = (kC + 127) / 128;
      const float* sc = reinterpret_cast<const float*>(e + kC);
      for (int i = 0; i < kC; ++i) {
        k[size_t(i)] = fp8_e4m3_to_f32(e[i]) * sc[i / 128];
        if (dot == DType::BF16) k[size_t(i)] = bf16_to_f32(f32_to_bf16(k[size_t(i)]));
      }
      for (int i = 0; i < kRope; ++i)
        k[size_t(kC + i)] = bf16_to_f32(reinterpret_cast<const uint16_t*>(e + kC + groups * 4)[i]);
    }
    return k;
  }
};

// (cache dtype, dot dtype)
using Dtypes = std::pair<DType, DType>;
class MlaAttention : public ::testing::TestWithParam<std::tuple<cpu::Isa, Dtypes, int>> {};

TEST_P(MlaAttention, MatchesReferenceAndIsBatchInvariant) {
  const cpu::Isa isa = std::get<0>(GetParam());
  if (!cpu::cpu_runs(isa)) GTEST_SKIP() << "ISA not on this CPU";
  IsaScope scope(isa);
  const auto [cache_dtype, dot_dtype] = std::get<1>(GetParam());
  const Shape shape = kShapes[std::get<2>(GetParam())];
  const int kC = shape.c, kRope = shape.rope, kHeads = shape.heads, kBlock = shape.block;
  const CacheFixture st(cache_dtype, shape);
  const std::vector<size_t> all = {0, 1, 2, 3};
  const ForwardBatch b = st.batch(all);
  const int64_t n = int64_t(b.n_rows());
  const std::vector<float> q_lat = random_floats(size_t(n * kHeads * kC), 1);
  const std::vector<float> q_pe = random_floats(size_t(n * kHeads * kRope), 2);
  const float scale = 0.3f;
  auto params = [&](const ForwardBatch& fb, int64_t row0, float* out) {
    MlaAttentionParams p;
    p.q_latent = q_lat.data() + row0 * kHeads * kC;
    p.q_pe = q_pe.data() + row0 * kHeads * kRope;
    p.ld_q_pe_row = kHeads * kRope;
    p.ld_q_pe_head = kRope;
    p.out_latent = out;
    p.n_heads = kHeads;
    p.softmax_scale = scale;
    p.batch = &fb;
    p.cache = st.cache.data();
    p.layout = st.layout;
    p.block_size = kBlock;
    p.dot_dtype = dot_dtype;
    return p;
  };

  std::vector<float> out(size_t(n * kHeads * kC));
  {
    ThreadScope t(2);
    cpu::mla_attention(params(b, 0, out.data()));
  }

  // Reference, in double.
  for (size_t si = 0; si < b.seqs.size(); ++si) {
    const BatchSequence& s = b.seqs[si];
    for (int32_t i = 0; i < s.n_new; ++i) {
      const int64_t row = s.row_begin + i;
      const int32_t n_keys = b.positions[size_t(row)] + 1;
      for (int h = 0; h < kHeads; ++h) {
        const float* ql = q_lat.data() + (row * kHeads + h) * kC;
        const float* qp = q_pe.data() + (row * kHeads + h) * kRope;
        const std::vector<float> ql_bf16 = bf16_rounded(ql, kC), qp_bf16 = bf16_rounded(qp, kRope);
        if (dot_dtype == DType::BF16) {
          ql = ql_bf16.data();
          qp = qp_bf16.data();
        }
        std::vector<double> sc(static_cast<size_t>(n_keys));
        double mx = -1e300;
        for (int32_t t = 0; t < n_keys; ++t) {
          const std::vector<float> k = st.key(si, t, dot_dtype);
          double dot = 0;
          for (int c = 0; c < kC; ++c) dot += double(ql[c]) * k[size_t(c)];
          for (int c = 0; c < kRope; ++c) dot += double(qp[c]) * k[size_t(kC + c)];
          sc[size_t(t)] = dot * scale;
          mx = std::max(mx, sc[size_t(t)]);
        }
        double sum = 0;
        for (double& v : sc) sum += (v = std::exp(v - mx));
        // With bf16 dots each weight the values take is rounded to bf16 (relative error <= 2^-9):
        // allowed 2^-8 * sum_t p_t |v_t| on top.
        std::vector<double> want(kC, 0.0), weighted_abs(kC, 0.0);
        for (int32_t t = 0; t < n_keys; ++t) {
          const std::vector<float> k = st.key(si, t, dot_dtype);
          for (int c = 0; c < kC; ++c) {
            want[size_t(c)] += sc[size_t(t)] / sum * k[size_t(c)];
            weighted_abs[size_t(c)] += sc[size_t(t)] / sum * std::fabs(k[size_t(c)]);
          }
        }
        for (int c = 0; c < kC; ++c) {
          const double tol = 2e-5 + (dot_dtype == DType::BF16 ? weighted_abs[size_t(c)] / 256 : 0.0);
          ASSERT_NEAR(out[size_t((row * kHeads + h) * kC + c)], want[size_t(c)], tol)
              << "seq " << si << " row " << row << " head " << h << " c " << c;
        }
      }
    }
  }

  // Each sequence alone, on one thread, row by row.
  ThreadScope t(1);
  for (size_t si = 0; si < all.size(); ++si) {
    const BatchSequence& s = b.seqs[si];
    for (int32_t i = 0; i < s.n_new; ++i) {
      ForwardBatch one;
      one.token_ids = {0};
      one.positions = {b.positions[size_t(s.row_begin + i)]};
      one.seqs.push_back({0, 1, one.positions[0] + 1, s.block_tables});
      std::vector<float> alone(size_t(kHeads * kC));
      cpu::mla_attention(params(one, s.row_begin + i, alone.data()));
      ASSERT_EQ(std::memcmp(alone.data(), out.data() + (s.row_begin + i) * kHeads * kC, alone.size() * 4), 0)
          << "seq " << si << " row " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(IsasAndCacheDtypes, MlaAttention,
                         ::testing::Combine(::testing::ValuesIn(kAllIsas),
                                            ::testing::Values(Dtypes{DType::F32, DType::F32},
                                                              Dtypes{DType::BF16, DType::F32},
                                                              Dtypes{DType::F8_E4M3, DType::F32},
                                                              Dtypes{DType::BF16, DType::BF16},
                                                              Dtypes{DType::F8_E4M3, DType::BF16}),
                                            ::testing::Range(0, int(std::size(kShapes)))),
                         [](const auto& info) {
                           const Dtypes t = std::get<1>(info.param);
                           const Shape& sh = kShapes[std::get<2>(info.param)];
                           return isa_test_name(std::get<0>(info.param)) + "_" +
                                  std::string(dtype_name(t.first)) +
                                  (t.second == DType::BF16 ? "_bf16_dots" : "") + "_c" + std::to_string(sh.c) +
                                  "_rope" + std::to_string(sh.rope) + "_heads" + std::to_string(sh.heads) +
                                  "_block" + std::to_string(sh.block);
                         });

// With bf16 dots an fp8 cache is the bf16 cache holding its latents dequantized and rounded to bf16
// (fp8_cache_as_bf16, the definition in MlaAttentionParams), bit for bit, at every level: the
// amx level's tiles convert keys they cannot read in place, the vector kernels a block at a time.
TEST(MlaAttentionFp8, Bf16DotsReadTheBf16CacheOfItsRoundedEntries) {
  for (cpu::Isa isa : kAllIsas) {
    if (!cpu::cpu_runs(isa)) continue;
    IsaScope scope(isa);
    for (const Shape& shape : kShapes) {
      SCOPED_TRACE(isa_test_name(isa) + ", c " + std::to_string(shape.c) + ", heads " + std::to_string(shape.heads));
      const CacheFixture st(DType::F8_E4M3, shape);
      const std::vector<uint8_t> bf16_cache = fp8_cache_as_bf16(st.cache, st.layout);
      const ForwardBatch b = st.batch({0, 1, 2, 3});
      const int64_t n = int64_t(b.n_rows());
      const std::vector<float> q_lat = random_floats(size_t(n * shape.heads * shape.c), 1);
      const std::vector<float> q_pe = random_floats(size_t(n * shape.heads * shape.rope), 2);
      std::vector<float> outs[2];
      for (int k = 0; k < 2; ++k) {
        outs[k].assign(size_t(n * shape.heads * shape.c), NAN);
        MlaAttentionParams p;
        p.q_latent = q_lat.data();
        p.q_pe = q_pe.data();
        p.ld_q_pe_row = int64_t(shape.heads) * shape.rope;
        p.ld_q_pe_head = shape.rope;
        p.out_latent = outs[k].data();
        p.n_heads = shape.heads;
        p.softmax_scale = 0.3f;
        p.batch = &b;
        p.cache = k == 0 ? st.cache.data() : bf16_cache.data();
        p.layout = k == 0 ? st.layout : MlaCacheLayout{DType::BF16, shape.c, shape.rope};
        p.block_size = shape.block;
        p.dot_dtype = DType::BF16;
        ThreadScope t(2);
        cpu::mla_attention(p);
      }
      ASSERT_EQ(std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * 4), 0);
    }
  }
}

}  // namespace
}  // namespace deepinfer::test
