// ExpertParallelMoe against the single-process MoE kernel: with the experts spread over 1-5
// ranks (threads exchanging through FakeExpertGroup), every rank's rows come out bitwise equal
// to what cpu_backend().moe computes with every expert at hand; for bf16 and fp8 weights, f32
// and bf16 activations, idle ranks (0 rows) and uneven loads. A failed group zeroes the output.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "core/dtype.h"
#include "fake_expert_group.h"
#include "model/deepseek_v4/clamped_moe.h"
#include "model/expert_parallel_moe.h"

namespace deepinfer {
namespace {

struct Mlp {
  std::vector<uint16_t> gate, up, down;   // bf16, or fp8 bytes in the low half when fp8
  std::vector<uint8_t> gate8, up8, down8;
  std::vector<float> gate_s, up_s, down_s;
  LinearWeight g, u, d;
};

// A layer of n_experts routed experts plus a shared one, random, in `dtype` (BF16 or F8_E4M3).
struct Layer {
  int64_t hidden, inter;
  std::vector<Mlp> experts;
  Mlp shared;
  std::vector<MlpWeightRefs> refs;
  MlpWeightRefs shared_ref;

  Layer(int n_experts, int64_t hidden_, int64_t inter_, DType dtype, DType act, std::mt19937& rng)
      : hidden(hidden_), inter(inter_), experts(size_t(n_experts)) {
    for (Mlp& e : experts) make(e, inter, dtype, act, rng);
    make(shared, 2 * inter, dtype, act, rng);
    for (Mlp& e : experts) refs.push_back({&e.g, &e.u, &e.d});
    shared_ref = {&shared.g, &shared.u, &shared.d};
  }

  void make(Mlp& m, int64_t width, DType dtype, DType act, std::mt19937& rng) {
    auto fill = [&](LinearWeight& w, std::vector<uint16_t>& b16, std::vector<uint8_t>& b8, std::vector<float>& s,
                    int64_t n_out, int64_t n_in) {
      std::normal_distribution<float> dist(0.0f, 0.1f);
      w.n_out = n_out;
      w.n_in = n_in;
      w.dtype = dtype;
      if (dtype == DType::BF16) {
        for (int64_t i = 0; i < n_out * n_in; ++i) b16.push_back(f32_to_bf16(dist(rng)));
        w.data = b16.data();
        w.act_dtype = act;
      } else {
        std::uniform_int_distribution<int> byte(0, 0x7e);  // finite e4m3, either sign
        for (int64_t i = 0; i < n_out * n_in; ++i) b8.push_back(uint8_t(byte(rng) | (rng() & 0x80)));
        w.block_rows = w.block_cols = 32;
        const int64_t n_s = ((n_out + 31) / 32) * ((n_in + 31) / 32);
        for (int64_t i = 0; i < n_s; ++i) s.push_back(0.001f * float(1 + rng() % 8));
        w.data = b8.data();
        w.scale_inv = s.data();
      }
    };
    fill(m.g, m.gate, m.gate8, m.gate_s, width, hidden);
    fill(m.u, m.up, m.up8, m.up_s, width, hidden);
    fill(m.d, m.down, m.down8, m.down_s, hidden, width);
  }
};

// One rank's rows: x [m, hidden] and its routing (distinct experts per row, random weights).
struct Rows {
  int64_t m;
  std::vector<float> x, weights, y;
  std::vector<int32_t> ids;
};

Rows random_rows(int64_t m, int64_t hidden, int n_experts, int top_k, std::mt19937& rng, int hot_expert = -1) {
  Rows r{m, {}, {}, {}, {}};
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int64_t i = 0; i < m * hidden; ++i) r.x.push_back(dist(rng));
  for (int64_t i = 0; i < m; ++i) {
    std::vector<int32_t> all(static_cast<size_t>(n_experts));
    for (int e = 0; e < n_experts; ++e) all[size_t(e)] = e;
    std::shuffle(all.begin(), all.end(), rng);
    if (hot_expert >= 0) std::iter_swap(all.begin(), std::find(all.begin(), all.end(), hot_expert));
    for (int j = 0; j < top_k; ++j) {
      r.ids.push_back(all[size_t(j)]);
      r.weights.push_back(std::uniform_real_distribution<float>(0.05f, 1.0f)(rng));
    }
  }
  return r;
}

std::vector<float> single_process(const Layer& L, const Rows& r, int top_k) {
  std::vector<float> y(size_t(r.m * L.hidden), -1.0f);
  cpu_backend().moe({r.x.data(), L.hidden, r.m, L.refs.data(), int(L.refs.size()), top_k, r.ids.data(),
                     r.weights.data(), &L.shared_ref, y.data(), L.hidden});
  return y;
}

void run_group(const Layer& L, std::vector<Rows>& rows, int top_k) {
  const int n = int(rows.size());
  test::ExchangeHub hub(n);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&, rank] {
      test::FakeExpertGroup group(hub, rank);
      auto placement = ExpertPlacement::contiguous(int(L.refs.size()), n, rank);
      ASSERT_TRUE(placement.ok());
      // Only the held experts are bound on this rank: the others' weights are absent.
      std::vector<MlpWeightRefs> refs(L.refs.size());
      for (const int32_t e : placement->held_experts()) refs[size_t(e)] = L.refs[size_t(e)];
      ExpertParallelMoe moe(group, {0, 1}, *placement, EplbOptions{}, 1, nullptr, cpu_backend());
      Rows& r = rows[size_t(rank)];
      r.y.assign(size_t(r.m * L.hidden), -1.0f);
      for (int layer = 0; layer < 2; ++layer)  // scratch reused across layers
        moe.run(layer, r.x.data(), L.hidden, r.m, L.hidden, top_k, r.ids.data(), r.weights.data(), refs,
                &L.shared_ref, r.y.data(), L.hidden);
      EXPECT_TRUE(group.health().ok()) << group.health().message();
      EXPECT_EQ(group.n_counts, 2);
      EXPECT_EQ(group.n_exchanges, 4);
    });
  }
  for (auto& t : threads) t.join();
}

struct Case {
  DType weights, activations;
  int n_ranks;
};

class ExpertParallelMoeTest : public testing::TestWithParam<Case> {};

TEST_P(ExpertParallelMoeTest, BitwiseEqualToTheSingleProcessKernel) {
  const Case c = GetParam();
  std::mt19937 rng(1234 + c.n_ranks);
  const int n_experts = 8, top_k = 3;
  const Layer layer(n_experts, 64, 32, c.weights, c.activations, rng);
  std::vector<Rows> rows;
  for (int rank = 0; rank < c.n_ranks; ++rank) {
    // Uneven: rank 1 idle (0 rows), rank 2 a long prefill-sized batch, one hot expert on rank 0.
    const int64_t m = rank == 1 ? 0 : rank == 2 ? 37 : 1 + rank;
    rows.push_back(random_rows(m, layer.hidden, n_experts, top_k, rng, rank == 0 ? 5 : -1));
  }
  run_group(layer, rows, top_k);
  for (int rank = 0; rank < c.n_ranks; ++rank) {
    const std::vector<float> want = single_process(layer, rows[size_t(rank)], top_k);
    ASSERT_EQ(rows[size_t(rank)].y.size(), want.size());
    EXPECT_EQ(std::memcmp(rows[size_t(rank)].y.data(), want.data(), want.size() * 4), 0) << "rank " << rank;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ExpertParallelMoeTest,
                         testing::Values(Case{DType::BF16, DType::F32, 1}, Case{DType::BF16, DType::F32, 2},
                                         Case{DType::BF16, DType::F32, 3}, Case{DType::BF16, DType::F32, 5},
                                         Case{DType::BF16, DType::BF16, 2}, Case{DType::BF16, DType::BF16, 4},
                                         Case{DType::F8_E4M3, DType::F32, 2}, Case{DType::F8_E4M3, DType::F32, 4}));

// DeepSeek-V4's clamped experts across ranks (clamped_moe_expert_parallel, through
// ExpertParallelMoe's model-computed experts): over 1-4 ranks, bitwise equal to clamped_moe with
// every expert at hand, with limits low enough that the clamps bite (the shared expert unclamped
// as V4's, or clamped as V4.1's), idle and uneven ranks.
TEST(ExpertParallelMoe, ClampedExpertsAreBitwiseTheSingleProcessLayer) {
  for (const int n_ranks : {1, 2, 3, 4}) {
    std::mt19937 rng(99 + n_ranks);
    const int n_experts = 8, top_k = 3;
    const float limit = 0.05f, shared_limit = n_ranks % 2 ? 0.0f : 0.07f;  // V4's shared unclamped, V4.1's clamped
    const Layer layer(n_experts, 64, 32, DType::BF16, DType::F32, rng);
    std::vector<ExpertWeights> experts;
    for (const Mlp& e : layer.experts) experts.push_back({e.g, e.u, e.d});
    const ExpertWeights shared{layer.shared.g, layer.shared.u, layer.shared.d};
    std::vector<Rows> rows;
    for (int rank = 0; rank < n_ranks; ++rank)
      rows.push_back(random_rows(rank == 1 ? 0 : rank == 2 ? 29 : 2 + rank, layer.hidden, n_experts, top_k, rng));
    test::ExchangeHub hub(n_ranks);
    std::vector<std::thread> threads;
    for (int rank = 0; rank < n_ranks; ++rank) {
      threads.emplace_back([&, rank] {
        test::FakeExpertGroup group(hub, rank);
        auto placement = ExpertPlacement::contiguous(n_experts, n_ranks, rank);
        ASSERT_TRUE(placement.ok());
        std::vector<ExpertWeights> held(experts.size());  // the others unbound
        for (const int32_t e : placement->held_experts()) held[size_t(e)] = experts[size_t(e)];
        ExpertParallelMoe moe(group, {0}, *placement, EplbOptions{}, 1, nullptr, cpu_backend());
        ClampedMoeScratch scratch;
        Rows& r = rows[size_t(rank)];
        r.y.assign(size_t(r.m * layer.hidden), -1.0f);
        clamped_moe_expert_parallel(moe, 0, cpu_backend(), held, &shared, limit, r.x.data(), r.m, layer.hidden, top_k,
                                    r.ids.data(), r.weights.data(), r.y.data(), scratch, shared_limit);
        EXPECT_TRUE(group.health().ok()) << group.health().message();
      });
    }
    for (auto& t : threads) t.join();
    for (int rank = 0; rank < n_ranks; ++rank) {
      const Rows& r = rows[size_t(rank)];
      std::vector<float> want(size_t(r.m * layer.hidden), -1.0f);
      ClampedMoeScratch scratch;
      clamped_moe(cpu_backend(), experts, &shared, limit, r.x.data(), r.m, layer.hidden, top_k, r.ids.data(),
                  r.weights.data(), want.data(), scratch, shared_limit);
      ASSERT_EQ(r.y.size(), want.size());
      EXPECT_EQ(std::memcmp(r.y.data(), want.data(), want.size() * 4), 0) << n_ranks << " ranks, rank " << rank;
    }
  }
}

// clamped_moe runs whole experts on the threads when at least two per thread have rows, else every
// expert's linears split across the threads: the same bits either way, and each row's as alone
// (three experts: split linears).
TEST(ClampedMoe, ExpertsOnTheThreadsAreBitwiseTheSplitLinears) {
  std::mt19937 rng(17);
  const int n_experts = 8, top_k = 3;
  const Layer layer(n_experts, 64, 32, DType::BF16, DType::F32, rng);
  std::vector<ExpertWeights> experts;
  for (const Mlp& e : layer.experts) experts.push_back({e.g, e.u, e.d});
  const ExpertWeights shared{layer.shared.g, layer.shared.u, layer.shared.d};
  const Rows r = random_rows(29, layer.hidden, n_experts, top_k, rng);
  const auto run = [&](int threads, int64_t r0, int64_t m) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> y(size_t(m * layer.hidden), -1.0f);
    ClampedMoeScratch scratch;
    clamped_moe(cpu_backend(), experts, &shared, 0.05f, r.x.data() + r0 * layer.hidden, m, layer.hidden, top_k,
                r.ids.data() + r0 * top_k, r.weights.data() + r0 * top_k, y.data(), scratch, 0.07f);
    omp_set_num_threads(saved);
    return y;
  };
  const std::vector<float> split = run(1, 0, r.m), by_expert = run(2, 0, r.m);
  ASSERT_EQ(std::memcmp(split.data(), by_expert.data(), split.size() * 4), 0);
  for (int64_t i = 0; i < r.m; ++i) {
    const std::vector<float> alone = run(2, i, 1);
    ASSERT_EQ(std::memcmp(alone.data(), by_expert.data() + i * layer.hidden, alone.size() * 4), 0) << "row " << i;
  }
}

TEST(ExpertParallelMoe, Bf16OnTheWireIsCloseAndHalvesTheBytes) {
  std::mt19937 rng(5);
  const int n_ranks = 3, n_experts = 6, top_k = 2;
  const Layer layer(n_experts, 64, 32, DType::BF16, DType::F32, rng);
  std::vector<Rows> rows;
  for (int rank = 0; rank < n_ranks; ++rank) rows.push_back(random_rows(4 + rank, layer.hidden, n_experts, top_k, rng));
  test::ExchangeHub hub(n_ranks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n_ranks; ++rank) {
    threads.emplace_back([&, rank] {
      test::FakeExpertGroup group(hub, rank);
      auto placement = ExpertPlacement::contiguous(n_experts, n_ranks, rank);
      ExpertParallelMoe moe(group, {0}, *placement, EplbOptions{}, 1, nullptr, cpu_backend(), DType::BF16);
      Rows& r = rows[size_t(rank)];
      r.y.assign(size_t(r.m * layer.hidden), -1.0f);
      moe.run(0, r.x.data(), layer.hidden, r.m, layer.hidden, top_k, r.ids.data(), r.weights.data(), layer.refs,
              &layer.shared_ref, r.y.data(), layer.hidden);
      EXPECT_TRUE(group.health().ok());
    });
  }
  for (auto& t : threads) t.join();
  double max_err = 0, max_ref = 0;
  bool all_equal = true;
  for (const Rows& r : rows) {
    const std::vector<float> want = single_process(layer, r, top_k);
    for (size_t i = 0; i < want.size(); ++i) {
      max_err = std::max(max_err, double(std::fabs(r.y[i] - want[i])));
      max_ref = std::max(max_ref, double(std::fabs(want[i])));
      all_equal &= r.y[i] == want[i];
    }
  }
  EXPECT_FALSE(all_equal);                // rounded: not the f32 result
  EXPECT_LT(max_err, 0.02 * max_ref);     // two bf16 roundings (input row, expert output)
  EXPECT_EQ(dispatch_record_bytes(64, DType::BF16), 8 + 128);
  EXPECT_EQ(return_record_bytes(64, DType::BF16), 128);
}

TEST(ExpertDispatch, WireRowsRoundTrip) {
  const std::vector<float> exact = {1.0f, -2.5f, 0.0f, 3.140625f, -65536.0f, 1e-3f};
  std::vector<uint8_t> wire(exact.size() * 2);
  rows_to_wire(exact.data(), 3, 2, 3, DType::BF16, wire.data());
  std::vector<float> back(6);
  rows_from_wire(wire.data(), 2, 3, DType::BF16, back.data(), 3);
  for (size_t i = 0; i < 5; ++i) EXPECT_EQ(back[i], exact[i]);  // bf16 values come back exactly
  EXPECT_NEAR(back[5], 1e-3f, 1e-5f);
  EXPECT_EQ(back[5], bf16_to_f32(f32_to_bf16(1e-3f)));
  std::vector<uint8_t> wire32(exact.size() * 4);
  rows_to_wire(exact.data(), 3, 2, 3, DType::F32, wire32.data());
  rows_from_wire(wire32.data(), 2, 3, DType::F32, back.data(), 3);
  EXPECT_EQ(back, exact);
}

TEST(ExpertParallelMoe, AFailedExchangeFailsTheGroupAndZeroesTheOutput) {
  std::mt19937 rng(7);
  const Layer layer(4, 32, 16, DType::BF16, DType::F32, rng);
  Rows r = random_rows(3, layer.hidden, 4, 2, rng);
  test::ExchangeHub hub(1);
  test::FakeExpertGroup group(hub, 0);
  group.fail_at_call = 1;  // the dispatch payload, after the counts
  ExpertParallelMoe moe(group, {0}, *ExpertPlacement::contiguous(4, 1, 0), EplbOptions{}, 1, nullptr, cpu_backend());
  r.y.assign(size_t(r.m * layer.hidden), 3.0f);
  moe.run(0, r.x.data(), layer.hidden, r.m, layer.hidden, 2, r.ids.data(), r.weights.data(), layer.refs,
          &layer.shared_ref, r.y.data(), layer.hidden);
  ASSERT_FALSE(group.health().ok());
  EXPECT_NE(group.health().message().find("on purpose"), std::string::npos);
  for (const float v : r.y) ASSERT_EQ(v, 0.0f);
  // Later layers do not communicate at all.
  moe.run(0, r.x.data(), layer.hidden, r.m, layer.hidden, 2, r.ids.data(), r.weights.data(), layer.refs,
          &layer.shared_ref, r.y.data(), layer.hidden);
  EXPECT_EQ(group.n_counts, 1);
  EXPECT_EQ(group.n_exchanges, 0);
}

TEST(ExpertParallelMoe, EplbMovesHotExpertsWhileOutputsStayBitwise) {
  // 16 experts over 4 ranks with 4 redundant slots; every rank's rows all pick experts 0-3 (held
  // by rank 0 at first, with the first 4 copies on ranks 0 and 1). A rebalance every 3 forwards
  // over a window of 3 spreads copies of them over every rank.
  std::mt19937 rng(11);
  const int n_ranks = 4, n_experts = 16, top_k = 4;
  const Layer layer(n_experts, 32, 16, DType::BF16, DType::F32, rng);
  std::vector<std::vector<Rows>> forwards;  // [forward][rank]
  for (int f = 0; f < 7; ++f) {
    std::vector<Rows> per_rank;
    for (int rank = 0; rank < n_ranks; ++rank) {
      Rows r = random_rows(5, layer.hidden, 4, top_k, rng);  // ids among 0-3 only
      per_rank.push_back(std::move(r));
    }
    forwards.push_back(std::move(per_rank));
  }
  test::ExchangeHub hub(n_ranks);
  std::vector<ExpertLoad> loads(n_ranks);
  std::vector<std::vector<std::vector<int32_t>>> rebinds(n_ranks);  // [rank][call]: held experts
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n_ranks; ++rank) {
    threads.emplace_back([&, rank] {
      test::FakeExpertGroup group(hub, rank);
      const std::vector<int64_t> no_load(n_experts, 0);
      auto slots = eplb_placement(no_load, n_experts + 4, n_ranks, 1, 1);
      auto initial = ExpertPlacement::from_slots(n_experts, n_ranks, rank, slots->slot_expert, slots->slot_rank);
      ASSERT_TRUE(initial.ok());
      std::vector<MlpWeightRefs> refs(layer.refs.size());
      for (const int32_t e : initial->held_experts()) refs[size_t(e)] = layer.refs[size_t(e)];
      ExpertParallelMoe moe(group, {3}, *initial, EplbOptions{4, 3, 3}, 1, &loads[size_t(rank)], cpu_backend());
      const auto rebind = [&](int l, std::span<const int32_t> held) {
        EXPECT_EQ(l, 3);
        rebinds[size_t(rank)].emplace_back(held.begin(), held.end());
        std::fill(refs.begin(), refs.end(), MlpWeightRefs{});
        for (const int32_t e : held) refs[size_t(e)] = layer.refs[size_t(e)];
        return Status::Ok();
      };
      for (auto& per_rank : forwards) {
        moe.begin_forward(rebind);
        Rows& r = per_rank[size_t(rank)];
        r.y.assign(size_t(r.m * layer.hidden), -1.0f);
        moe.run(3, r.x.data(), layer.hidden, r.m, layer.hidden, top_k, r.ids.data(), r.weights.data(), refs,
                &layer.shared_ref, r.y.data(), layer.hidden);
      }
      EXPECT_TRUE(group.health().ok()) << group.health().message();
    });
  }
  for (auto& t : threads) t.join();
  for (size_t f = 0; f < forwards.size(); ++f)
    for (int rank = 0; rank < n_ranks; ++rank) {
      const Rows& r = forwards[f][size_t(rank)];
      const std::vector<float> want = single_process(layer, r, top_k);
      ASSERT_EQ(std::memcmp(r.y.data(), want.data(), want.size() * 4), 0) << "forward " << f << " rank " << rank;
    }
  // Forwards 0-1 ran on the initial placement (the 4 extra slots all copies of expert 0), 2-4
  // after the first rebalance (two copies of each of experts 0-3, two per rank), 5-6 after the
  // second (no change: the same loads). Rows computed per rank: uneven, then even (80 per
  // forward over 4 ranks).
  std::vector<int64_t> first, second;
  for (int rank = 0; rank < n_ranks; ++rank) {
    const ExpertLoad::Snapshot s = loads[size_t(rank)].snapshot();
    ASSERT_EQ(s.n_rebalances, 2);
    ASSERT_EQ(s.computed_per_period.size(), 3u);
    first.push_back(s.computed_per_period[0]);
    second.push_back(s.computed_per_period[1]);
    EXPECT_EQ(rebinds[size_t(rank)].size(), 1u) << rank;  // the second rebalance changed nothing
    int copies = 0;
    for (int e = 0; e < 4; ++e) copies += s.copies[0][size_t(e)];
    EXPECT_EQ(copies, 8);
    EXPECT_EQ(s.window[0][0] + s.window[0][1] + s.window[0][2] + s.window[0][3], 3 * 4 * 5 * 4);
  }
  EXPECT_GE(*std::max_element(first.begin(), first.end()), 2 * 80 * 4 / 10);  // 40% of the rows on one rank
  for (const int64_t v : second) EXPECT_EQ(v, 3 * 80 / 4);
}

}  // namespace
}  // namespace deepinfer
