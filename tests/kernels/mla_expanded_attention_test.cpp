// Expanded MLA attention (the prefill formulation) over the paged latent cache: against a
// double-precision reference of the expanded math for every cache dtype, kv_b_proj dtype and ISA,
// f32 and bf16 dot products (an fp8 cache with bf16 dots bitwise the bf16 cache of its rounded
// entries); and bitwise per-row invariance: a sequence's rows computed all at
// once, in chunks of 1, 7 and 64, and among other sequences on two threads are the same bits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "kernel_test_util.h"
#include "kernels/cpu/mla_attention.h"
#include "kernels/cpu/mla_expanded_attention.h"

namespace deepinfer::test {
namespace {

// Odd sizes on purpose: tails in every dot product and value column group.
constexpr int kC = 96, kRope = 16, kHeads = 5, kNope = 24, kV = 20, kBlock = 16;
constexpr int kQHead = kNope + kRope;

struct Fixture {
  MlaCacheLayout layout;
  std::vector<uint8_t> cache;
  std::vector<std::vector<int32_t>> tables;
  std::vector<int32_t> n_ctx = {3, 70, 300, 65};  // 300 spans two expansion chunks
  TestWeight w_kv_b;
  std::vector<float> q;  // [max rows, kHeads, kQHead], row i used for position i of any sequence

  Fixture(DType cache_dtype, DType weight_dtype)
      : layout{cache_dtype, kC, kRope}, w_kv_b(weight_dtype, kHeads * (kNope + kV), kC, 7) {
    int n_blocks = 0;
    for (int32_t n : n_ctx) n_blocks += (n + kBlock - 1) / kBlock;
    cache.resize(size_t(n_blocks) * kBlock * layout.bytes_per_token());
    int next = n_blocks;  // block ids backwards: tables are not contiguous
    for (int32_t n : n_ctx) {
      tables.emplace_back();
      for (int b = 0; b < (n + kBlock - 1) / kBlock; ++b) tables.back().push_back(--next);
    }
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
    q = random_floats(size_t(*std::max_element(n_ctx.begin(), n_ctx.end())) * kHeads * kQHead, 3, 0.5f);
  }

  // Rows [begin, end) of each listed sequence, in order: (sequence, begin, end).
  ForwardBatch batch(const std::vector<std::tuple<size_t, int32_t, int32_t>>& parts) const {
    ForwardBatch b;
    for (const auto& [s, begin, end] : parts) {
      b.seqs.push_back({int32_t(b.n_rows()), end - begin, end, {tables[s].data()}});
      for (int32_t p = begin; p < end; ++p) {
        b.token_ids.push_back(0);
        b.positions.push_back(p);
      }
    }
    return b;
  }

  // The batch's queries: each row's position's query.
  std::vector<float> queries(const ForwardBatch& b) const {
    std::vector<float> out;
    for (int32_t pos : b.positions)
      out.insert(out.end(), q.begin() + size_t(pos) * kHeads * kQHead, q.begin() + size_t(pos + 1) * kHeads * kQHead);
    return out;
  }

  std::vector<float> run(const ForwardBatch& b, DType dot, int threads) const {
    const std::vector<float> qs = queries(b);
    std::vector<float> out(b.n_rows() * kHeads * kV, NAN);
    MlaExpandedAttentionParams p;
    p.q = qs.data();
    p.ld_q = kHeads * kQHead;
    p.ld_q_head = kQHead;
    p.out = out.data();
    p.ld_out = kHeads * kV;
    p.w_kv_b = &w_kv_b.w;
    p.n_heads = kHeads;
    p.qk_nope_head_dim = kNope;
    p.v_head_dim = kV;
    p.softmax_scale = 0.25f;
    p.batch = &b;
    p.cache = cache.data();
    p.layout = layout;
    p.block_size = kBlock;
    p.dot_dtype = dot;
    ThreadScope t(threads);
    cpu::mla_expanded_attention(p);
    return out;
  }

  // Latent and rope part of sequence s at position t as stored, widened.
  std::vector<double> entry(size_t s, int32_t t) const {
    const uint8_t* e = cache.data() +
                       (size_t(tables[s][size_t(t / kBlock)]) * kBlock + size_t(t % kBlock)) * layout.bytes_per_token();
    std::vector<double> k(kC + kRope);
    if (layout.dtype == DType::F32) {
      for (int i = 0; i < kC + kRope; ++i) k[size_t(i)] = reinterpret_cast<const float*>(e)[i];
    } else if (layout.dtype == DType::BF16) {
      for (int i = 0; i < kC + kRope; ++i) k[size_t(i)] = bf16_to_f32(reinterpret_cast<const uint16_t*>(e)[i]);
    } else {
      const float* sc = reinterpret_cast<const float*>(e + kC);
      for (int i = 0; i < kC; ++i) k[size_t(i)] = double(fp8_e4m3_to_f32(e[i])) * sc[i / 128];
      for (int i = 0; i < kRope; ++i)
        k[size_t(kC + i)] = bf16_to_f32(reinterpret_cast<const uint16_t*>(e + kC + ((kC + 127) / 128) * 4)[i]);
    }
    return k;
  }

  // out[h, :] for sequence s at position pos, in double over the expanded keys and values.
  std::vector<double> reference(size_t s, int32_t pos) const {
    std::vector<std::vector<float>> w(size_t(w_kv_b.w.n_out));
    for (int64_t o = 0; o < w_kv_b.w.n_out; ++o) w[size_t(o)] = weight_row(w_kv_b.w, o);
    std::vector<double> out(size_t(kHeads) * kV, 0.0);
    const float* qr = q.data() + size_t(pos) * kHeads * kQHead;
    for (int h = 0; h < kHeads; ++h) {
      std::vector<double> score(size_t(pos) + 1), v(size_t(pos + 1) * kV);
      for (int32_t t = 0; t <= pos; ++t) {
        const std::vector<double> e = entry(s, t);
        double sc = 0;
        for (int d = 0; d < kNope + kV; ++d) {
          double x = 0;
          for (int i = 0; i < kC; ++i) x += e[size_t(i)] * w[size_t(h * (kNope + kV) + d)][size_t(i)];
          if (d < kNope) sc += double(qr[h * kQHead + d]) * x;
          else v[size_t(t) * kV + size_t(d - kNope)] = x;
        }
        for (int i = 0; i < kRope; ++i) sc += double(qr[h * kQHead + kNope + i]) * e[size_t(kC + i)];
        score[size_t(t)] = sc * 0.25;
      }
      const double mx = *std::max_element(score.begin(), score.end());
      double sum = 0;
      for (double& x : score) sum += (x = std::exp(x - mx));
      for (int32_t t = 0; t <= pos; ++t)
        for (int j = 0; j < kV; ++j) out[size_t(h) * kV + j] += score[size_t(t)] / sum * v[size_t(t) * kV + j];
    }
    return out;
  }
};

// (ISA, cache dtype, kv_b_proj dtype, dot dtype)
using Case = std::tuple<cpu::Isa, DType, DType, DType>;
class MlaExpandedAttention : public ::testing::TestWithParam<Case> {};

TEST_P(MlaExpandedAttention, MatchesTheDoubleReference) {
  const auto [isa, cache_dtype, weight_dtype, dot] = GetParam();
  if (!cpu::cpu_runs(isa)) GTEST_SKIP() << "ISA not on this CPU";
  IsaScope scope(isa);
  const Fixture f(cache_dtype, weight_dtype);
  // Decodes of two sequences, a chunk past the first expansion chunk, a whole prompt.
  const ForwardBatch b = f.batch({{0, 2, 3}, {1, 69, 70}, {2, 280, 300}, {3, 0, 65}});
  const std::vector<float> out = f.run(b, dot, 2);
  // bf16: queries, keys, values and weights rounded to bf16 (relative error 2^-9 each).
  const double tol = dot == DType::BF16 ? 2e-2 : 1e-4;
  size_t row = 0;
  for (const BatchSequence& s : b.seqs) {
    const size_t seq = size_t(&s - b.seqs.data());
    for (int i = 0; i < s.n_new; ++i, ++row) {
      if (i % 9 != 0 && i != s.n_new - 1) continue;  // a sample of the rows: the reference is slow
      const std::vector<double> want = f.reference(seq, b.positions[row]);
      double scale = 0;
      for (double x : want) scale = std::max(scale, std::fabs(x));
      for (size_t j = 0; j < want.size(); ++j)
        ASSERT_NEAR(out[row * kHeads * kV + j], want[j], tol * (scale + 0.5)) << "row " << row << " element " << j;
    }
  }
}

class MlaExpandedInvariance : public ::testing::TestWithParam<Case> {};

TEST_P(MlaExpandedInvariance, RowsAreBitwiseTheSameInEveryChunkingAndBatch) {
  const auto [isa, cache_dtype, weight_dtype, dot] = GetParam();
  if (!cpu::cpu_runs(isa)) GTEST_SKIP() << "ISA not on this CPU";
  IsaScope scope(isa);
  const Fixture f(cache_dtype, weight_dtype);
  const int32_t n = f.n_ctx[2];
  const std::vector<float> whole = f.run(f.batch({{2, 0, n}}), dot, 1);
  const size_t row_floats = size_t(kHeads) * kV;
  for (int chunk : {1, 7, 64}) {
    for (int32_t begin = 0; begin < n; begin += chunk) {
      if (chunk == 1 && begin == 10) begin = 250;  // single rows: the first ones and across the expansion chunk
      const int32_t end = std::min(n, begin + chunk);
      // Neighbours before and after, on two threads.
      const ForwardBatch b = f.batch({{0, 1, 3}, {2, begin, end}, {3, 60, 65}, {1, 69, 70}});
      const std::vector<float> out = f.run(b, dot, 2);
      const int32_t r0 = b.seqs[1].row_begin;
      ASSERT_EQ(std::memcmp(out.data() + size_t(r0) * row_floats, whole.data() + size_t(begin) * row_floats,
                            size_t(end - begin) * row_floats * 4),
                0)
          << "chunk " << chunk << " rows [" << begin << ", " << end << ")";
    }
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (cpu::Isa isa : kAllIsas) {
    for (DType cache : {DType::F32, DType::BF16, DType::F8_E4M3})
      for (DType weight : {DType::BF16, DType::F8_E4M3}) out.emplace_back(isa, cache, weight, DType::F32);
    for (DType weight : {DType::BF16, DType::F8_E4M3}) out.emplace_back(isa, DType::BF16, weight, DType::BF16);
  }
  return out;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  const auto [isa, cache, weight, dot] = info.param;
  return isa_test_name(isa) + "_cache_" + std::string(dtype_name(cache)) + "_w_" +
         std::string(dtype_name(weight)) + "_dot_" + std::string(dtype_name(dot));
}

std::vector<Case> invariance_cases() {
  std::vector<Case> out;
  for (cpu::Isa isa : kAllIsas) {
    out.emplace_back(isa, DType::F32, DType::BF16, DType::F32);
    out.emplace_back(isa, DType::BF16, DType::F8_E4M3, DType::F32);
    out.emplace_back(isa, DType::F8_E4M3, DType::BF16, DType::F32);
    out.emplace_back(isa, DType::BF16, DType::BF16, DType::BF16);
    out.emplace_back(isa, DType::BF16, DType::F8_E4M3, DType::BF16);
    out.emplace_back(isa, DType::F8_E4M3, DType::BF16, DType::BF16);
  }
  return out;
}

// With bf16 dots an fp8 cache is the bf16 cache of its latents dequantized and rounded to bf16
// (fp8_cache_as_bf16), bit for bit, at every level.
TEST(MlaExpandedAttentionFp8, Bf16DotsReadTheBf16CacheOfItsRoundedEntries) {
  for (cpu::Isa isa : kAllIsas) {
    if (!cpu::cpu_runs(isa)) continue;
    IsaScope scope(isa);
    SCOPED_TRACE(isa_test_name(isa));
    const Fixture fp8(DType::F8_E4M3, DType::BF16);
    Fixture bf16(DType::BF16, DType::BF16);  // the same tables, weights and queries
    bf16.cache = fp8_cache_as_bf16(fp8.cache, fp8.layout);
    const ForwardBatch b = fp8.batch({{0, 0, 3}, {1, 60, 70}, {2, 0, 300}});
    const std::vector<float> a = fp8.run(b, DType::BF16, 2), c = bf16.run(b, DType::BF16, 2);
    ASSERT_EQ(std::memcmp(a.data(), c.data(), a.size() * 4), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(All, MlaExpandedAttention, ::testing::ValuesIn(cases()), case_name);
INSTANTIATE_TEST_SUITE_P(All, MlaExpandedInvariance, ::testing::ValuesIn(invariance_cases()), case_name);

}  // namespace
}  // namespace deepinfer::test
