// The packed blocks of fp8 (e4m3, block scales) and int8 (I8_SM) weights with bf16 activations on
// the levels that run them on 16-row weight tiles, amx (simd_amx.h) and avx512bf16
// (pair_tiles_avx512_bf16.h), and the amx level's FP4 (e2m1, UE8M0 per 32) weights (amx_weight_rows.h):
//  - fp8: against a double reference of the dequantized weights (code * scale) on the
//    bf16-rounded inputs within the kernels' stated bound, for scale blocks 128 x 128, 32 x 32 and
//    16 x 64, n_in not a multiple of 32 or of the block, n_out not a multiple of 16; int8 (I8_SM,
//    the requantized lm_head's codes) the same way, with a scale per row (blocks 1 x 128, 1 x 32),
//    whose value the reference takes from the format's definition;
//  - FP4 (amx): bitwise the same weights expanded to bf16 on the same level;
//  - both: every batch size 1..300 gives each row the bits it gets alone, on one and two threads
//    (linear, SwiGLU, MoE);
//  - fp8, int8 and FP4 relaid tile-major (cpu::relay_weight): the layout byte for byte, and bitwise
//    the stored layout's outputs;
//  - fp8 whose power-of-two scales fold (LinearWeight::scales_fold, amx): bitwise the same weights
//    expanded to bf16, stored and relaid, and exact at the folding range's ends.
// Each level's tests are skipped where the CPU (or, for AMX, the OS) does not offer it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <span>
#include <string>

#include "kernel_test_util.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/moe.h"

namespace deepinfer::test {
namespace {

class AmxBlockScaled : public AmxLevelTest {};

// fp8 and int8 weights on each level whose packed blocks run on weight tiles.
class TileBlockScaled : public ::testing::TestWithParam<cpu::Isa> {
 protected:
  void SetUp() override {
    if (!cpu::cpu_runs(GetParam())) GTEST_SKIP() << "ISA not on this CPU";
  }
  IsaScope scope{cpu::cpu_runs(GetParam()) ? GetParam() : cpu::active_isa()};
};

// An fp8 (or, with `dtype` I8_SM, int8) weight with [block_rows, block_cols] scale blocks and bf16
// activations.
std::unique_ptr<TestWeight> fp8_weight(int64_t n_out, int64_t n_in, int block_rows, int block_cols, uint32_t seed,
                                       DType dtype = DType::F8_E4M3) {
  auto tw = std::make_unique<TestWeight>(dtype, n_out, n_in, seed, block_cols, block_rows);
  const int64_t sr = (n_out + block_rows - 1) / block_rows, sc = (n_in + block_cols - 1) / block_cols;
  tw->scales = random_floats(size_t(sr * sc), seed + 3, 1e-2f);
  for (float& s : tw->scales) s = std::fabs(s) + 1e-3f;
  tw->w.scale_inv = tw->scales.data();
  tw->w.act_dtype = DType::BF16;
  return tw;
}

// W[o, i] = code * scale in double (exact), and the kernels' bound on |y - x . W|:
// (n_in + 2 * n_blocks) * 2^-24 * sum |x_i W[o, i]| (plus f32's smallest normal, for sums near 0).
struct Fp8Reference {
  double value = 0, bound = 0;
};
// An I8_SM code's value by the format's definition: bit 7 the sign, bits 0-6 the magnitude.
double int8_sm_value(uint8_t c) { return (c & 0x80 ? -1.0 : 1.0) * double(c & 0x7f); }

Fp8Reference fp8_reference(const LinearWeight& w, const std::vector<float>& x, int64_t o) {
  const uint8_t* row = static_cast<const uint8_t*>(w.data) + o * w.n_in;
  const int64_t n_cb = (w.n_in + w.block_cols - 1) / w.block_cols;
  double sum = 0, mag = 0;
  for (int64_t i = 0; i < w.n_in; ++i) {
    const double code = w.dtype == DType::I8_SM ? int8_sm_value(row[i]) : double(fp8_e4m3_to_f32(row[i]));
    const double p = double(x[size_t(i)]) * code * double(w.scale_inv[o / w.block_rows * n_cb + i / w.block_cols]);
    sum += p;
    mag += std::fabs(p);
  }
  return {sum, double(w.n_in + 2 * n_cb) * std::ldexp(1.0, -24) * mag + 1e-37};
}

// (n_out, n_in, block_rows, block_cols): tails of 12 and 16 columns past the last chunk and block,
// outputs not a multiple of 16, several K blocks (1040 = 32.5 chunks), one weight of 5 rows, and
// rows long enough that decode copies each group's panels right before its tiles (7800).
struct Fp8Shape {
  int64_t n_out, n_in;
  int block_rows, block_cols;
};
const Fp8Shape kFp8Shapes[] = {{37, 300, 128, 128}, {130, 1040, 32, 32}, {50, 272, 16, 64}, {5, 64, 16, 32}, {300, 7800, 128, 128}};
// int8 with a scale per row: outputs not a multiple of 16 (the last tile's rows past n_out read no
// scale), a block per chunk, one tile of 5 rows, and decode's long rows.
const Fp8Shape kInt8Shapes[] = {{37, 300, 1, 128}, {130, 1040, 1, 32}, {5, 64, 1, 32}, {300, 7800, 1, 128}};

// Each weight dtype with block scales and its shapes.
struct CodesCase {
  DType dtype;
  const Fp8Shape* shapes;
  size_t n;
};
const CodesCase kCodesCases[] = {{DType::F8_E4M3, kFp8Shapes, std::size(kFp8Shapes)},
                                 {DType::I8_SM, kInt8Shapes, std::size(kInt8Shapes)}};
std::string shape_name(DType dtype, const Fp8Shape& s) {
  return std::string(dtype_name(dtype)) + " " + std::to_string(s.n_out) + " x " + std::to_string(s.n_in) + ", blocks " +
         std::to_string(s.block_rows) + " x " + std::to_string(s.block_cols);
}

TEST_P(TileBlockScaled, Fp8AndInt8LinearMatchReferenceForEveryBatchSize) {
  for (const CodesCase& k : kCodesCases)
  for (const Fp8Shape& s : std::span(k.shapes, k.n)) {
    SCOPED_TRACE(shape_name(k.dtype, s));
    const auto tw = fp8_weight(s.n_out, s.n_in, s.block_rows, s.block_cols, 7, k.dtype);
    const int64_t ldx = s.n_in + 5;
    const std::vector<float> x = random_floats(size_t(kMaxRows * ldx), 11);
    std::vector<float> y(size_t(kMaxRows * s.n_out));
    cpu::linear({x.data(), ldx, kMaxRows, &tw->w, y.data(), s.n_out});
    for (int64_t r = 0; r < kMaxRows; r += 13) {
      const std::vector<float> xr = bf16_rounded(x.data() + r * ldx, size_t(s.n_in));
      for (int64_t o = 0; o < s.n_out; ++o) {
        const Fp8Reference want = fp8_reference(tw->w, xr, o);
        const float got = y[size_t(r * s.n_out + o)];
        ASSERT_LE(std::fabs(double(got) - want.value), want.bound) << "r " << r << " o " << o << ": " << got << " vs " << want.value;
      }
    }
    expect_every_batch_size_invariant(s.n_out, [&](int64_t r0, int64_t m, float* out) {
      cpu::linear({x.data() + r0 * ldx, ldx, m, &tw->w, out, s.n_out});
    });
  }
}

TEST_P(TileBlockScaled, Fp8AndInt8SwigluMatchReferenceForEveryBatchSize) {
  const std::pair<DType, Fp8Shape> cases[] = {{DType::F8_E4M3, {45, 300, 128, 128}}, {DType::F8_E4M3, {20, 544, 32, 32}},
                                              {DType::I8_SM, {45, 300, 1, 128}}};
  for (const auto& [dtype, s] : cases) {
    SCOPED_TRACE(shape_name(dtype, s));
    const auto gate = fp8_weight(s.n_out, s.n_in, s.block_rows, s.block_cols, 3, dtype);
    const auto up = fp8_weight(s.n_out, s.n_in, s.block_rows, s.block_cols, 4, dtype);
    const std::vector<float> x = random_floats(size_t(kMaxRows * s.n_in), 5);
    std::vector<float> y(size_t(kMaxRows * s.n_out));
    cpu::swiglu({x.data(), s.n_in, kMaxRows, &gate->w, &up->w, y.data(), s.n_out});
    for (int64_t r = 0; r < kMaxRows; r += 17) {
      const std::vector<float> xr = bf16_rounded(x.data() + r * s.n_in, size_t(s.n_in));
      for (int64_t o = 0; o < s.n_out; ++o) {
        const Fp8Reference g = fp8_reference(gate->w, xr, o), u = fp8_reference(up->w, xr, o);
        const double want = g.value / (1.0 + std::exp(-g.value)) * u.value;
        // silu(g) * u with g and u each within their bound (|silu'| <= 1.1), plus the epilogue's
        // few roundings.
        const double bound = 1.1 * g.bound * (std::fabs(u.value) + u.bound) + std::fabs(g.value) * u.bound +
                             1e-5 * std::fabs(want) + 1e-30;
        ASSERT_LE(std::fabs(double(y[size_t(r * s.n_out + o)]) - want), bound) << "r " << r << " o " << o;
      }
    }
    expect_every_batch_size_invariant(s.n_out, [&](int64_t r0, int64_t m, float* out) {
      cpu::swiglu({x.data() + r0 * s.n_in, s.n_in, m, &gate->w, &up->w, out, s.n_out});
    });
  }
}

// A packed FP4 weight (random nibbles, scale bytes 118..126) and its exact bf16 expansion, both
// with bf16 activations.
struct Fp4Pair {
  LinearWeight fp4, bf16;
  std::vector<uint8_t> packed, scales;
  std::vector<uint16_t> expanded;
  Fp4Pair(int64_t n_out, int64_t n_in, uint32_t seed)
      : packed(size_t(n_out * n_in / 2)), scales(size_t(n_out * n_in / 32)), expanded(size_t(n_out * n_in)) {
    std::mt19937 rng(seed);
    for (uint8_t& b : packed) b = uint8_t(rng());
    for (uint8_t& e : scales) e = uint8_t(118 + rng() % 9);
    for (int64_t i = 0; i < n_out; ++i)
      for (int64_t j = 0; j < n_in; ++j)
        expanded[size_t(i * n_in + j)] =
            f32_to_bf16(fp4_e2m1_at(packed.data() + i * n_in / 2, j) * ue8m0_to_f32(scales[size_t((i * n_in + j) / 32)]));
    fp4 = {DType::F4_E2M1, packed.data(), n_out, n_in};
    fp4.scale_e8m0 = scales.data();
    bf16 = {DType::BF16, expanded.data(), n_out, n_in};
    fp4.act_dtype = bf16.act_dtype = DType::BF16;
  }
  Fp4Pair(const Fp4Pair&) = delete;
};

// w (fp8, int8 or FP4) relaid tile-major (cpu::relay_weight) into buf (filled with 0xff first),
// checked against LinearWeight::tile_major's layout: the values of rows 16t..16t + 15, columns
// [32c, 32c + 32) in block (t * kc + c) (codes in pair order; FP4 nibbles in groups of 4 rows, a
// 16-bit word per column), zero past n_out and n_in; then the fp8 and int8 scales (a copy) or the
// FP4 blocks' scale bytes.
LinearWeight tile_major(const LinearWeight& w, AlignedVector<uint8_t>& buf) {
  buf.assign(cpu::relaid_bytes(w), 0xff);
  EXPECT_FALSE(buf.empty()) << "the level relays this weight with bf16 activations";
  const LinearWeight t = cpu::relay_weight(w, buf.data());
  EXPECT_TRUE(t.tile_major);
  EXPECT_EQ(t.data, buf.data());
  const bool fp8 = has_block_scales(w.dtype);  // byte codes, fp8 or int8
  const int64_t kc = (w.n_in + 31) / 32, blocks = (w.n_out + 15) / 16 * kc, row_bytes = fp8 ? w.n_in : w.n_in / 2;
  const int64_t chunk = fp8 ? 32 : 16, block = 16 * chunk;
  const uint8_t* stored = static_cast<const uint8_t*>(w.data);
  // Value (code byte or nibble) j of the block's row r as relaid, and as stored (0 past the matrix).
  const auto relaid = [&](int64_t b, int64_t r, int64_t j) -> int {
    const uint8_t* at = buf.data() + b * block;
    if (fp8) return at[j / 2 * 32 + 2 * r + j % 2];  // byte 32p + 2r + e: column 2p + e of row r
    return at[r / 4 * 64 + 2 * j + r % 4 / 2] >> (4 * (r % 2)) & 15;  // word j of group r / 4, nibble r % 4
  };
  const auto want = [&](int64_t b, int64_t r, int64_t j) -> int {
    const int64_t row = b / kc * 16 + r, col = b % kc * 32 + j;
    if (row >= w.n_out || col >= w.n_in) return 0;
    const uint8_t* p = stored + row * row_bytes;
    return fp8 ? p[col] : p[col / 2] >> (4 * (col % 2)) & 15;
  };
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t r = 0; r < 16; ++r)
      for (int64_t j = 0; j < 32; ++j)
        if (relaid(b, r, j) != want(b, r, j)) {
          ADD_FAILURE() << "block " << b << ", row " << r << ", column " << j << ": " << relaid(b, r, j) << ", want " << want(b, r, j);
          return t;
        }
  const uint8_t* after = buf.data() + blocks * block;
  if (fp8) {
    const int64_t n_scales = (w.n_out + w.block_rows - 1) / w.block_rows * ((w.n_in + w.block_cols - 1) / w.block_cols);
    EXPECT_EQ(int64_t(buf.size()), blocks * block + n_scales * 4);
    EXPECT_EQ(static_cast<const void*>(t.scale_inv), after);
    EXPECT_EQ(std::memcmp(t.scale_inv, w.scale_inv, size_t(n_scales) * 4), 0);
  } else {
    EXPECT_EQ(int64_t(buf.size()), blocks * block + blocks * 16);
    EXPECT_EQ(t.scale_e8m0, after);
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t r = 0; r < 16; ++r) {
        const int64_t row = b / kc * 16 + r;
        if (row < w.n_out) {
          EXPECT_EQ(after[b * 16 + r], w.scale_e8m0[row * (w.n_in / 32) + b % kc]) << "row " << row;
        }
      }
  }
  return t;
}

// Tile-major fp8 codes give every output the stored layout's bits: one token tile (streamed a
// chunk at a time) and several (panels copied block by block), on one and two threads; linear
// (every shape above), SwiGLU and MoE (experts and a shared expert relaid). On avx512bf16 up to 8
// rows stream the relaid codes (from 5 rows two weight tiles at a time), and one row the stored.
TEST_P(TileBlockScaled, Fp8AndInt8TileMajorGiveTheStoredLayoutsBits) {
  const std::vector<int64_t> batches = {1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 40};
  for (const CodesCase& k : kCodesCases)
  for (const Fp8Shape& s : std::span(k.shapes, k.n)) {
    SCOPED_TRACE(shape_name(k.dtype, s));
    const auto tw = fp8_weight(s.n_out, s.n_in, s.block_rows, s.block_cols, 7, k.dtype);
    AlignedVector<uint8_t> buf;
    expect_linear_alike(tw->w, tile_major(tw->w, buf), batches);
  }
  for (const auto& [dtype, block_rows] : {std::pair{DType::F8_E4M3, 128}, std::pair{DType::I8_SM, 1}}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const int64_t inter = 45, n_in = 300;
    const auto gate = fp8_weight(inter, n_in, block_rows, 128, 3, dtype), up = fp8_weight(inter, n_in, block_rows, 128, 4, dtype);
    AlignedVector<uint8_t> gb, ub;
    expect_swiglu_alike(gate->w, up->w, tile_major(gate->w, gb), tile_major(up->w, ub), batches);
  }
  {
    const ExpertsTwice experts(
        4, 96, 48, [](int64_t n_out, int64_t n_in, uint32_t seed) { return fp8_weight(n_out, n_in, 128, 128, seed); },
        tile_major);
    expect_moe_alike(experts.stored, experts.relaid, {1, 3, 40});
  }
}

TEST_F(AmxBlockScaled, Fp4LinearIsTheBf16ExpansionForEveryBatchSize) {
  for (auto [n_out, n_in] : {std::pair<int64_t, int64_t>{37, 288}, {130, 1056}, {5, 32}, {300, 7808}}) {
    SCOPED_TRACE(std::to_string(n_out) + " x " + std::to_string(n_in));
    const Fp4Pair w(n_out, n_in, 7);
    const int64_t ldx = n_in + 3;
    const std::vector<float> x = random_floats(size_t(kMaxRows * ldx), 11);
    for (int64_t m : {int64_t(1), int64_t(16), int64_t(17), kMaxRows}) {
      std::vector<float> y(size_t(m * n_out)), y_bf16(size_t(m * n_out));
      cpu::linear({x.data(), ldx, m, &w.fp4, y.data(), n_out});
      cpu::linear({x.data(), ldx, m, &w.bf16, y_bf16.data(), n_out});
      expect_same_bits(y, y_bf16);
    }
    expect_every_batch_size_invariant(n_out, [&](int64_t r0, int64_t m, float* out) {
      cpu::linear({x.data() + r0 * ldx, ldx, m, &w.fp4, out, n_out});
    });
  }
}

// FP4 relaid tile-major: the stored layout's bits (linear on one and two threads, SwiGLU), one token
// tile (streamed) and several (panels).
TEST_F(AmxBlockScaled, Fp4TileMajorGivesTheStoredLayoutsBits) {
  const std::vector<int64_t> batches = {1, 2, 16, 17, 40};
  for (auto [n_out, n_in] : {std::pair<int64_t, int64_t>{37, 288}, {130, 1056}, {5, 32}, {300, 7808}}) {
    SCOPED_TRACE(std::to_string(n_out) + " x " + std::to_string(n_in));
    const Fp4Pair w(n_out, n_in, 7);
    AlignedVector<uint8_t> buf;
    expect_linear_alike(w.fp4, tile_major(w.fp4, buf), batches);
  }
  const int64_t inter = 45, n_in = 320;
  const Fp4Pair gate(inter, n_in, 3), up(inter, n_in, 4);
  AlignedVector<uint8_t> gb, ub;
  expect_swiglu_alike(gate.fp4, up.fp4, tile_major(gate.fp4, gb), tile_major(up.fp4, ub), batches);
}

TEST_F(AmxBlockScaled, Fp4SwigluIsTheBf16ExpansionForEveryBatchSize) {
  const int64_t inter = 45, n_in = 320;
  const Fp4Pair gate(inter, n_in, 3), up(inter, n_in, 4);
  const std::vector<float> x = random_floats(size_t(kMaxRows * n_in), 9);
  for (int64_t m : {int64_t(1), int64_t(16), kMaxRows}) {
    std::vector<float> y(size_t(m * inter)), y_bf16(size_t(m * inter));
    cpu::swiglu({x.data(), n_in, m, &gate.fp4, &up.fp4, y.data(), inter});
    cpu::swiglu({x.data(), n_in, m, &gate.bf16, &up.bf16, y_bf16.data(), inter});
    expect_same_bits(y, y_bf16);
  }
  expect_every_batch_size_invariant(inter, [&](int64_t r0, int64_t m, float* out) {
    cpu::swiglu({x.data() + r0 * n_in, n_in, m, &gate.fp4, &up.fp4, out, inter});
  });
}

// MoE with fp8 experts (128 x 128 blocks, down projections of 48 inputs: a short chunk), with a
// shared expert of twice the width: groups from one row to several token tiles, each row's output
// the one it gets alone.
TEST_P(TileBlockScaled, Fp8MoeIsInvariantForEveryBatchSize) {
  const int64_t d = 96, inter = 48;
  const int E = 4;
  std::vector<std::unique_ptr<TestWeight>> ws;
  std::vector<MlpWeightRefs> experts;
  for (int e = 0; e <= E; ++e) {  // the last is the shared expert
    const int64_t width = e == E ? 2 * inter : inter;
    ws.push_back(fp8_weight(width, d, 128, 128, 100 + 7 * uint32_t(e)));
    ws.push_back(fp8_weight(width, d, 128, 128, 101 + 7 * uint32_t(e)));
    ws.push_back(fp8_weight(d, width, 128, 128, 102 + 7 * uint32_t(e)));
    experts.push_back({&ws[ws.size() - 3]->w, &ws[ws.size() - 2]->w, &ws[ws.size() - 1]->w});
  }
  expect_moe_invariant_for_every_batch_size(d, experts.data(), E, &experts[E]);
}

// MoE with FP4 experts (64 wide) and a shared expert of twice the width, as above.
// An fp8 weight with power-of-two scales 2^k, k in [-12, -4] (UE8M0, as DeepSeek-V4's) that fold
// (LinearWeight::scales_fold), and the same weights expanded to bf16 (code * 2^k, exact).
struct FoldedFp8 {
  std::unique_ptr<TestWeight> fp8;
  std::vector<uint16_t> expanded;
  LinearWeight bf16;
  FoldedFp8(int64_t n_out, int64_t n_in, int block_rows, int block_cols, uint32_t seed)
      : fp8(fp8_weight(n_out, n_in, block_rows, block_cols, seed)), expanded(size_t(n_out * n_in)) {
    std::mt19937 rng(seed + 5);
    for (float& s : fp8->scales) s = std::ldexp(1.0f, -12 + int(rng() % 9));
    fp8->w.scales_fold = pow2_block_scales(fp8->w);
    EXPECT_TRUE(fp8->w.scales_fold);
    for (int64_t o = 0; o < n_out; ++o) {
      const std::vector<float> row = weight_row(fp8->w, o);
      for (int64_t i = 0; i < n_in; ++i) expanded[size_t(o * n_in + i)] = f32_to_bf16(row[size_t(i)]);
    }
    bf16 = {DType::BF16, expanded.data(), n_out, n_in};
    bf16.act_dtype = DType::BF16;
  }
};

// Which weights fold: F8_E4M3 only, row blocks of whole tiles, column blocks of whole chunks, and
// every scale a power of two from 2^-117 (e4m3's smallest subnormal then 2^-126, bf16's smallest
// normal) to 2^119 (448 * 2^119 below bf16's largest finite value).
TEST(Fp8FoldedScales, OnlyPowersOfTwoInRangeFold) {
  TestWeight tw(DType::F8_E4M3, 32, 64, 7, 32, 16);
  const auto folds_with = [&](float s) {
    std::fill(tw.scales.begin(), tw.scales.end(), 0.25f);
    tw.scales.back() = s;
    return pow2_block_scales(tw.w);
  };
  EXPECT_TRUE(folds_with(0.25f));
  EXPECT_TRUE(folds_with(std::ldexp(1.0f, -117)));
  EXPECT_TRUE(folds_with(std::ldexp(1.0f, 119)));
  EXPECT_FALSE(folds_with(std::ldexp(1.0f, -118)));
  EXPECT_FALSE(folds_with(std::ldexp(1.0f, 120)));
  EXPECT_FALSE(folds_with(0.3f));
  EXPECT_FALSE(folds_with(-0.25f));
  EXPECT_FALSE(folds_with(0.0f));
  std::fill(tw.scales.begin(), tw.scales.end(), 0.25f);
  tw.w.block_rows = 8;
  EXPECT_FALSE(pow2_block_scales(tw.w));
  TestWeight int8(DType::I8_SM, 32, 64, 7, 32, 16);
  std::fill(int8.scales.begin(), int8.scales.end(), 0.25f);
  EXPECT_FALSE(pow2_block_scales(int8.w));
}

// On amx, fp8 weights whose scales fold are bitwise their bf16 expansion, stored and relaid
// tile-major, for every batch size (one token tile streams the relaid codes as the tiles' B
// operand, more copy panels): linear over kFp8Shapes' tiled blocks, and SwiGLU.
TEST_F(AmxBlockScaled, Fp8WithFoldedScalesIsTheBf16Expansion) {
  for (const Fp8Shape& s : kFp8Shapes) {
    SCOPED_TRACE(shape_name(DType::F8_E4M3, s));
    const FoldedFp8 w(s.n_out, s.n_in, s.block_rows, s.block_cols, 7);
    AlignedVector<uint8_t> buf;
    const LinearWeight tm = tile_major(w.fp8->w, buf);
    EXPECT_TRUE(tm.scales_fold);
    const int64_t ldx = s.n_in + 5;
    const std::vector<float> x = random_floats(size_t(kMaxRows * ldx), 11);
    for (int64_t m : {int64_t(1), int64_t(5), int64_t(16), int64_t(17), kMaxRows}) {
      std::vector<float> y(size_t(m * s.n_out)), y_tm(y.size()), y_bf16(y.size());
      cpu::linear({x.data(), ldx, m, &w.fp8->w, y.data(), s.n_out});
      cpu::linear({x.data(), ldx, m, &tm, y_tm.data(), s.n_out});
      cpu::linear({x.data(), ldx, m, &w.bf16, y_bf16.data(), s.n_out});
      SCOPED_TRACE("m " + std::to_string(m));
      expect_same_bits(y, y_bf16);
      expect_same_bits(y_tm, y_bf16);
    }
    expect_every_batch_size_invariant(s.n_out, [&](int64_t r0, int64_t m, float* out) {
      cpu::linear({x.data() + r0 * ldx, ldx, m, &w.fp8->w, out, s.n_out});
    });
  }
  const int64_t inter = 45, n_in = 544;
  const FoldedFp8 gate(inter, n_in, 32, 32, 3), up(inter, n_in, 32, 32, 4);
  AlignedVector<uint8_t> gb, ub;
  const LinearWeight g = tile_major(gate.fp8->w, gb), u = tile_major(up.fp8->w, ub);
  const std::vector<float> x = random_floats(size_t(kMaxRows * n_in), 5);
  for (int64_t m : {int64_t(1), int64_t(16), kMaxRows}) {
    std::vector<float> y(size_t(m * inter)), y_tm(y.size()), y_bf16(y.size());
    cpu::swiglu({x.data(), n_in, m, &gate.fp8->w, &up.fp8->w, y.data(), inter});
    cpu::swiglu({x.data(), n_in, m, &g, &u, y_tm.data(), inter});
    cpu::swiglu({x.data(), n_in, m, &gate.bf16, &up.bf16, y_bf16.data(), inter});
    SCOPED_TRACE("SwiGLU, m " + std::to_string(m));
    expect_same_bits(y, y_bf16);
    expect_same_bits(y_tm, y_bf16);
  }
}

// Every e4m3 code (NaN codes aside) at both ends of the folding range, against a one-hot input,
// comes out as code * 2^k exactly: subnormal codes times 2^-117 and 448 times 2^119 included.
TEST_F(AmxBlockScaled, Fp8FoldedCodesConvertExactlyAtTheRangesEnds) {
  for (int k : {-117, 119}) {
    TestWeight tw(DType::F8_E4M3, 1, 256, 7, 32, 16);
    for (int c = 0; c < 256; ++c) tw.bytes[size_t(c)] = (c & 0x7f) == 0x7f ? 0 : uint8_t(c);
    std::fill(tw.scales.begin(), tw.scales.end(), std::ldexp(1.0f, k));
    tw.w.act_dtype = DType::BF16;
    tw.w.scales_fold = pow2_block_scales(tw.w);
    ASSERT_TRUE(tw.w.scales_fold);
    for (int c = 0; c < 256; ++c) {
      std::vector<float> x(256, 0.0f);
      x[size_t(c)] = 1.0f;
      float y = -1;
      cpu::linear({x.data(), 256, 1, &tw.w, &y, 1});
      EXPECT_EQ(y, std::ldexp(fp8_e4m3_to_f32(tw.bytes[size_t(c)]), k)) << "code " << c << ", 2^" << k;
    }
  }
}

TEST_F(AmxBlockScaled, Fp4MoeIsInvariantForEveryBatchSize) {
  const int64_t d = 96, inter = 64;
  const int E = 4;
  std::vector<std::unique_ptr<Fp4Pair>> ws;
  std::vector<MlpWeightRefs> experts;
  for (int e = 0; e <= E; ++e) {
    const int64_t width = e == E ? 2 * inter : inter;
    ws.push_back(std::make_unique<Fp4Pair>(width, d, 200 + 7 * uint32_t(e)));
    ws.push_back(std::make_unique<Fp4Pair>(width, d, 201 + 7 * uint32_t(e)));
    ws.push_back(std::make_unique<Fp4Pair>(d, width, 202 + 7 * uint32_t(e)));
    experts.push_back({&ws[ws.size() - 3]->fp4, &ws[ws.size() - 2]->fp4, &ws[ws.size() - 1]->fp4});
  }
  expect_moe_invariant_for_every_batch_size(d, experts.data(), E, &experts[E]);
}

INSTANTIATE_TEST_SUITE_P(Levels, TileBlockScaled, ::testing::Values(cpu::Isa::kAmx, cpu::Isa::kAvx512Bf16),
                         [](const auto& info) { return isa_test_name(info.param); });

}  // namespace
}  // namespace deepinfer::test
