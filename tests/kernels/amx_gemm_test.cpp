// The amx level's bf16 x bf16 blocks (simd_amx.h): every batch size 1..300 gives each row the
// bits it gets alone (one token tile streams the weights, more go through panels; passes, K
// blocks, output tails, weights of fewer than 16 rows, n_in not a multiple of 32), on one and on
// two threads, and the outputs match a double reference on the bf16-rounded inputs. bf16 weights
// relaid tile-major (cpu::relay_weight, read in place by the tiles): the layout value for value,
// and the stored layout's bits at every path (linear, SwiGLU, MoE). Skipped where the CPU or OS
// offers no AMX.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>

#include "core/aligned_vector.h"
#include "kernel_test_util.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/moe.h"

namespace deepinfer::test {
namespace {

class AmxGemm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cpu::best_supported_isa() < cpu::Isa::kAmx) GTEST_SKIP() << "no AMX on this CPU (or not granted by the OS)";
  }
};

std::unique_ptr<TestWeight> bf16_weight(int64_t n_out, int64_t n_in, uint32_t seed) {
  auto w = std::make_unique<TestWeight>(DType::BF16, n_out, n_in, seed);
  w->w.act_dtype = DType::BF16;
  return w;
}

// (n_out, n_in): odd tails of both, 16-row tiles exactly, a weight of 5 rows, and n_in a
// multiple of 32 with a last output group past the matrix (streamed rows fall back to a panel).
const std::pair<int64_t, int64_t> kShapes[] = {{37, 300}, {64, 256}, {130, 1040}, {5, 64}, {37, 256}};

TEST_F(AmxGemm, LinearMatchesReferenceForEveryBatchSize) {
  IsaScope scope(cpu::Isa::kAmx);
  for (auto [n_out, n_in] : kShapes) {
    SCOPED_TRACE(std::to_string(n_out) + " x " + std::to_string(n_in));
    const auto tw = bf16_weight(n_out, n_in, 7);
    const int64_t ldx = n_in + 5;
    const std::vector<float> x = random_floats(size_t(kMaxRows * ldx), 11);
    std::vector<float> y(size_t(kMaxRows * n_out));
    cpu::linear({x.data(), ldx, kMaxRows, &tw->w, y.data(), n_out});
    for (int64_t r = 0; r < kMaxRows; r += 13) {
      const std::vector<float> xr = bf16_rounded(x.data() + r * ldx, size_t(n_in));
      for (int64_t o = 0; o < n_out; ++o) {
        const std::vector<float> row = weight_row(tw->w, o);
        double scale = 0;
        for (int64_t i = 0; i < n_in; ++i) scale += std::fabs(double(xr[size_t(i)]) * row[size_t(i)]);
        ASSERT_TRUE(near(y[size_t(r * n_out + o)], ref_dot(xr.data(), row), scale))
            << "r " << r << " o " << o << ": " << y[size_t(r * n_out + o)] << " vs " << ref_dot(xr.data(), row);
      }
    }
    expect_every_batch_size_invariant(n_out, [&](int64_t r0, int64_t m, float* out) {
      cpu::linear({x.data() + r0 * ldx, ldx, m, &tw->w, out, n_out});
    });
  }
}

TEST_F(AmxGemm, SwigluMatchesReferenceForEveryBatchSize) {
  IsaScope scope(cpu::Isa::kAmx);
  for (auto [inter, n_in] : {std::pair<int64_t, int64_t>{45, 272}, {32, 512}, {7, 64}}) {
    SCOPED_TRACE(std::to_string(inter) + " x " + std::to_string(n_in));
    const auto gate = bf16_weight(inter, n_in, 3), up = bf16_weight(inter, n_in, 4);
    const std::vector<float> x = random_floats(size_t(kMaxRows * n_in), 5);
    std::vector<float> y(size_t(kMaxRows * inter));
    cpu::swiglu({x.data(), n_in, kMaxRows, &gate->w, &up->w, y.data(), inter});
    for (int64_t r = 0; r < kMaxRows; r += 17) {
      const std::vector<float> xr = bf16_rounded(x.data() + r * n_in, size_t(n_in));
      for (int64_t o = 0; o < inter; ++o) {
        const double g = ref_dot(xr.data(), weight_row(gate->w, o)), u = ref_dot(xr.data(), weight_row(up->w, o));
        const double want = g / (1.0 + std::exp(-g)) * u;
        ASSERT_TRUE(near(y[size_t(r * inter + o)], want, std::fabs(want), 1e-4)) << y[size_t(r * inter + o)] << " vs " << want;
      }
    }
    expect_every_batch_size_invariant(inter, [&](int64_t r0, int64_t m, float* out) {
      cpu::swiglu({x.data() + r0 * n_in, n_in, m, &gate->w, &up->w, out, inter});
    });
  }
}

// MoE with groups from one row to several token tiles: each row's output is the one it gets alone.
TEST_F(AmxGemm, MoeIsInvariantForEveryBatchSize) {
  IsaScope scope(cpu::Isa::kAmx);
  const int64_t d = 96, inter = 40;
  const int E = 4;
  std::vector<std::unique_ptr<TestWeight>> ws;
  std::vector<MlpWeightRefs> experts;
  for (int e = 0; e <= E; ++e) {  // the last is the shared expert
    const int64_t width = e == E ? 2 * inter : inter;
    ws.push_back(bf16_weight(width, d, 100 + 7 * e));
    ws.push_back(bf16_weight(width, d, 101 + 7 * e));
    ws.push_back(bf16_weight(d, width, 102 + 7 * e));
    if (e < E) experts.push_back({&ws[ws.size() - 3]->w, &ws[ws.size() - 2]->w, &ws[ws.size() - 1]->w});
  }
  const MlpWeightRefs shared{&ws[ws.size() - 3]->w, &ws[ws.size() - 2]->w, &ws[ws.size() - 1]->w};
  expect_moe_invariant_for_every_batch_size(d, experts.data(), E, &shared);
}

// w (bf16) relaid tile-major into buf (filled with 0xff first), checked value by value against
// LinearWeight::tile_major's layout: block t * kc + c holds rows [16t, 16t + 16) and columns
// [32c, 32c + 32), row r at element 32r, zero past n_out and n_in; nothing after the blocks.
LinearWeight bf16_tile_major(const LinearWeight& w, AlignedVector<uint8_t>& buf) {
  buf.assign(cpu::relaid_bytes(w), 0xff);
  const int64_t kc = (w.n_in + 31) / 32, blocks = (w.n_out + 15) / 16 * kc;
  EXPECT_EQ(int64_t(buf.size()), blocks * 1024) << "the amx level relays bf16 weights with bf16 activations";
  if (buf.empty()) return w;
  const LinearWeight t = cpu::relay_weight(w, buf.data());
  EXPECT_TRUE(t.tile_major);
  EXPECT_EQ(t.data, buf.data());
  const uint16_t* relaid = reinterpret_cast<const uint16_t*>(buf.data());
  const uint16_t* stored = static_cast<const uint16_t*>(w.data);
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t r = 0; r < 16; ++r)
      for (int64_t j = 0; j < 32; ++j) {
        const int64_t row = b / kc * 16 + r, col = b % kc * 32 + j;
        const uint16_t want = row < w.n_out && col < w.n_in ? stored[row * w.n_in + col] : 0;
        if (relaid[b * 512 + r * 32 + j] != want) {
          ADD_FAILURE() << "block " << b << ", row " << r << ", column " << j;
          return t;
        }
      }
  return t;
}

// Tile-major bf16 weights give every output the stored layout's bits: one token tile and several,
// one pass and two (300 rows of 1040 inputs), on one and two threads; every kShapes shape and
// 7800 inputs (a tail of 24); SwiGLU and MoE (experts and the shared expert relaid). The
// avx512bf16 level, whose pair tiles read bf16 weights as stored, relays none.
TEST_F(AmxGemm, Bf16TileMajorGivesTheStoredLayoutsBits) {
  IsaScope scope(cpu::Isa::kAmx);
  const std::vector<int64_t> batches = {1, 2, 3, 8, 15, 16, 17, 40, kMaxRows};
  std::vector<std::pair<int64_t, int64_t>> shapes(std::begin(kShapes), std::end(kShapes));
  shapes.push_back({300, 7800});
  for (auto [n_out, n_in] : shapes) {
    SCOPED_TRACE(std::to_string(n_out) + " x " + std::to_string(n_in));
    const auto tw = bf16_weight(n_out, n_in, 7);
    AlignedVector<uint8_t> buf;
    expect_linear_alike(tw->w, bf16_tile_major(tw->w, buf), batches);
  }
  {
    const int64_t inter = 45, n_in = 272;
    const auto gate = bf16_weight(inter, n_in, 3), up = bf16_weight(inter, n_in, 4);
    AlignedVector<uint8_t> gb, ub;
    expect_swiglu_alike(gate->w, up->w, bf16_tile_major(gate->w, gb), bf16_tile_major(up->w, ub), batches);
  }
  {
    const ExpertsTwice experts(4, 96, 40, bf16_weight, bf16_tile_major);
    expect_moe_alike(experts.stored, experts.relaid, batches);
  }
  if (cpu::cpu_runs(cpu::Isa::kAvx512Bf16)) {
    IsaScope pair_tiles(cpu::Isa::kAvx512Bf16);
    EXPECT_EQ(cpu::relaid_bytes(bf16_weight(64, 256, 1)->w), 0u);
  }
}

}  // namespace
}  // namespace deepinfer::test
