// Scheduler behaviour, driven by SchedulerSim (which checks the invariants after every step).
#include "engine/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "scheduler_sim.h"

namespace deepinfer::test {
namespace {

std::vector<int32_t> tokens(int n, int first = 1) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

// What any schedule must produce for sample `index` of a prompt.
std::vector<int32_t> expected_output(std::vector<int32_t> seq, int index, int n_output) {
  const size_t n_prompt = seq.size();
  for (int i = 0; i < n_output; ++i) seq.push_back(SchedulerSim::next_token(seq, index));
  return {seq.begin() + ptrdiff_t(n_prompt), seq.end()};
}

TEST(Scheduler, ChunksALongPromptByTheTokenBudget) {
  SchedulerSim sim(64, 4, {.max_num_batched_tokens = 16, .max_num_seqs = 8});
  const uint64_t r = sim.add(tokens(50), 3);
  std::vector<int> chunks;
  while (sim.scheduler.has_work()) {
    const auto out = sim.step();
    ASSERT_EQ(out.chunks.size(), 1u);
    chunks.push_back(out.chunks[0].n_new);
    EXPECT_EQ(out.chunks[0].sample, chunks.size() >= 4);
  }
  EXPECT_EQ(chunks, (std::vector<int>{16, 16, 16, 2, 1, 1}));
  EXPECT_EQ(sim.outputs().at({r, 0}), expected_output(tokens(50), 0, 3));
}

TEST(Scheduler, APrefillNeverStallsRunningDecodes) {
  SchedulerSim sim(256, 4, {.max_num_batched_tokens = 8, .max_num_seqs = 8});
  const uint64_t a = sim.add(tokens(2), 40), b = sim.add(tokens(2, 50), 40);
  sim.step();
  // A long prompt that goes first in scheduling order (higher priority) arrives.
  const uint64_t c = sim.add(tokens(100, 200), 2, /*priority=*/-1);
  int prefill_steps = 0;
  for (;;) {
    const auto out = sim.step();
    const auto* cc = out.of(c);
    ASSERT_NE(cc, nullptr);
    ASSERT_NE(out.of(a), nullptr);
    ASSERT_NE(out.of(b), nullptr);
    EXPECT_EQ(out.of(a)->n_new, 1);
    EXPECT_EQ(out.of(b)->n_new, 1);
    EXPECT_LE(cc->n_new, 6);
    ++prefill_steps;
    if (cc->sample) break;
  }
  EXPECT_EQ(prefill_steps, 17);  // 100 tokens at 6 per step
  sim.run();
  EXPECT_EQ(sim.outputs().at({c, 0}), expected_output(tokens(100, 200), 0, 2));
}

TEST(Scheduler, CapsRunningSequences) {
  SchedulerSim sim(256, 4, {.max_num_batched_tokens = 64, .max_num_seqs = 2});
  for (int i = 0; i < 5; ++i) sim.add(tokens(5, 10 * i), 4);
  const auto out = sim.step();
  EXPECT_EQ(out.chunks.size(), 2u);
  EXPECT_EQ(sim.scheduler.n_waiting(), 3);
  sim.run();
  EXPECT_EQ(sim.outputs().size(), 5u);
}

TEST(Scheduler, SamplesToForkCountAgainstMaxNumSeqs) {
  SchedulerSim sim(256, 4, {.max_num_batched_tokens = 64, .max_num_seqs = 4});
  sim.add(tokens(5), 3, 0, /*n=*/3);
  sim.add(tokens(5, 40), 3, 0, /*n=*/2);
  const auto out = sim.step();
  EXPECT_EQ(out.chunks.size(), 1u) << "3 + 2 samples exceed 4 slots";
  sim.run();
  EXPECT_EQ(sim.outputs().size(), 5u);
}

TEST(Scheduler, PriorityThenArrivalOrder) {
  SchedulerSim sim(256, 4, {.max_num_batched_tokens = 64, .max_num_seqs = 1});
  const uint64_t low = sim.add(tokens(5), 2, /*priority=*/5);
  const uint64_t high = sim.add(tokens(5, 30), 2, /*priority=*/0);
  const uint64_t high_later = sim.add(tokens(5, 60), 2, /*priority=*/0);
  std::vector<uint64_t> order;
  while (sim.scheduler.has_work()) {
    const auto out = sim.step();
    if (order.empty() || order.back() != out.chunks[0].request_id) order.push_back(out.chunks[0].request_id);
  }
  EXPECT_EQ(order, (std::vector<uint64_t>{high, high_later, low}));
}

// A waiting request of higher priority does not wait for running lower-priority ones to finish:
// they are preempted (and later recomputed, with the same output), whether what is short is
// sequence slots or KV blocks. Equal priorities never preempt each other.
TEST(Scheduler, AWaitingHigherPriorityPreemptsRunningLowerPriority) {
  for (const bool short_of_blocks : {false, true}) {
    SCOPED_TRACE(short_of_blocks ? "blocks" : "slots");
    // Slots: 1 running sequence at most. Blocks: 8 blocks of 4 tokens, of which low holds 6 when
    // high (3 blocks for its prompt) arrives.
    SchedulerSim sim(short_of_blocks ? 8 : 64, 4,
                     {.max_num_batched_tokens = 64, .max_num_seqs = short_of_blocks ? 8 : 1});
    const uint64_t low = sim.add(tokens(8), 20, /*priority=*/5);
    const uint64_t peer = short_of_blocks ? 0 : sim.add(tokens(3, 500), 3, /*priority=*/5);
    for (int i = 0; i < (short_of_blocks ? 14 : 3); ++i) sim.step();
    const uint64_t high = sim.add(tokens(12, 300), 4, /*priority=*/0);
    int steps_until_high = 0;
    for (;;) {
      const auto out = sim.step();
      ++steps_until_high;
      if (out.of(high)) break;
      ASSERT_LT(steps_until_high, 3) << "high waited for low to finish";
    }
    EXPECT_GE(sim.scheduler.n_preemptions(), 1u);
    sim.run();
    EXPECT_EQ(sim.outputs().at({low, 0}), expected_output(tokens(8), 0, 20));
    EXPECT_EQ(sim.outputs().at({high, 0}), expected_output(tokens(12, 300), 0, 4));
    if (!short_of_blocks) {
      EXPECT_EQ(sim.outputs().at({peer, 0}), expected_output(tokens(3, 500), 0, 3));
    }
  }
  // Equal priority: the later request waits, nothing is preempted.
  SchedulerSim sim(64, 4, {.max_num_batched_tokens = 64, .max_num_seqs = 1});
  sim.add(tokens(8), 10, /*priority=*/0);
  sim.step();
  sim.add(tokens(6, 300), 4, /*priority=*/0);
  sim.run();
  EXPECT_EQ(sim.scheduler.n_preemptions(), 0u);
}

TEST(Scheduler, PreemptsTheNewestWhenBlocksRunOutAndRecomputesIt) {
  // 6 blocks of 4 tokens; three sequences growing to 3 blocks each.
  SchedulerSim sim(6, 4, {.max_num_batched_tokens = 64, .max_num_seqs = 8});
  const uint64_t a = sim.add(tokens(4, 1), 8), b = sim.add(tokens(4, 20), 8), c = sim.add(tokens(4, 40), 8);
  bool saw_preemption = false;
  while (sim.scheduler.has_work()) {
    std::vector<uint64_t> before;
    for (const Sequence* s : sim.scheduler.running()) before.push_back(s->request_id());
    const auto out = sim.step();
    if (out.n_preempted > 0 && !saw_preemption) {
      saw_preemption = true;
      EXPECT_EQ(before.back(), c) << "the newest running sequence goes first";
      for (const Sequence* s : sim.scheduler.running()) EXPECT_NE(s->request_id(), c);
    }
  }
  EXPECT_TRUE(saw_preemption);
  EXPECT_GT(sim.scheduler.n_preemptions(), 0u);
  EXPECT_EQ(sim.outputs().at({a, 0}), expected_output(tokens(4, 1), 0, 8));
  EXPECT_EQ(sim.outputs().at({b, 0}), expected_output(tokens(4, 20), 0, 8));
  EXPECT_EQ(sim.outputs().at({c, 0}), expected_output(tokens(4, 40), 0, 8));
  EXPECT_EQ(sim.kv.pool().n_free(), 6);
}

TEST(Scheduler, ASequenceAsLongAsThePoolCompletesAmongOthers) {
  SchedulerSim sim(8, 4, {.max_num_batched_tokens = 5, .max_num_seqs = 8});
  for (int i = 0; i < 4; ++i) sim.add(tokens(6, 100 * i), 10);
  const uint64_t whole = sim.add(tokens(20, 700), 12);  // 32 tokens: all 8 blocks
  for (int i = 0; i < 4; ++i) sim.add(tokens(3, 900 + 10 * i), 20);
  sim.run();
  EXPECT_EQ(sim.outputs().size(), 9u);
  EXPECT_EQ(sim.outputs().at({whole, 0}), expected_output(tokens(20, 700), 0, 12));
}

TEST(Scheduler, AbortFreesBlocksInEveryState) {
  SchedulerSim sim(7, 4, {.max_num_batched_tokens = 64, .max_num_seqs = 8});
  const uint64_t a = sim.add(tokens(8, 1), 12), b = sim.add(tokens(8, 30), 12), c = sim.add(tokens(8, 60), 12);
  sim.step();
  sim.abort(a);  // running
  while (sim.scheduler.n_preemptions() == 0) sim.step();
  for (const Sequence* s : sim.scheduler.running()) ASSERT_NE(s->request_id(), c) << "c, the newest, was preempted";
  sim.abort(c);  // preempted
  (void)b;
  const uint64_t d = sim.add(tokens(3, 90), 2);
  sim.abort(d);  // waiting
  sim.run();
  EXPECT_EQ(sim.kv.pool().n_free(), 7);
  EXPECT_EQ(sim.outputs().size(), 4u);
}

TEST(Scheduler, ForkedSamplesShareThePromptBlocks) {
  SchedulerSim sim(64, 4, {.max_num_batched_tokens = 64, .max_num_seqs = 8});
  const uint64_t r = sim.add(tokens(10), 6, 0, /*n=*/3);
  sim.step();  // prefill, sample 3 first tokens
  ASSERT_EQ(sim.scheduler.n_running(), 3);
  const int32_t first = sim.scheduler.running()[0]->block_tables()[0][0];
  EXPECT_EQ(sim.kv.pool().ref_count(first), 3);
  const auto out = sim.step();
  EXPECT_EQ(out.n_block_copies, 2u) << "the shared partial block is copied for two of three";
  sim.run();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(sim.outputs().at({r, i}), expected_output(tokens(10), i, 6));
  EXPECT_NE(sim.outputs().at({r, 0}), sim.outputs().at({r, 1}));
}

TEST(Scheduler, CachedPrefixIsNotRecomputed) {
  SchedulerSim sim(64, 4, {.max_num_batched_tokens = 64, .max_num_seqs = 8});
  auto system = tokens(17);
  sim.add(system, 2);
  sim.run();
  auto turn = system;
  turn.push_back(500);
  turn.push_back(501);
  sim.add(turn, 2);
  const auto out = sim.step();
  ASSERT_EQ(out.chunks.size(), 1u);
  EXPECT_EQ(out.chunks[0].n_new, 3);  // 16 of 19 tokens from the cache
  EXPECT_EQ(out.chunks[0].n_cached_prompt, 16);
}

// Random traffic with shared prefixes, forks, priorities and aborts on small pools: every
// non-aborted sample's output equals what it produces alone, and the invariants hold throughout.
// Half the seeds add a window kind (a random lookback) beside the full one, as DeepSeek-V4 has:
// its released blocks, prefix hits that restore only the window, and its copies on write are
// checked by the same shadow cache.
TEST(Scheduler, RandomSchedulesMatchRunningAlone) {
  for (uint32_t seed = 0; seed < 120; ++seed) {
    std::mt19937 rng(seed);
    const int block = 1 + int(rng() % 8);
    const int n_blocks = 8 + int(rng() % 32);
    std::vector<int> lookbacks = {0};
    if (seed % 2 == 1) lookbacks.push_back(1 + int(rng() % 12));
    SchedulerSim sim(n_blocks, block,
                     {.max_num_batched_tokens = 1 + int(rng() % 40), .max_num_seqs = 1 + int(rng() % 12)},
                     rng() % 4 != 0, lookbacks);
    const int capacity = n_blocks * block;
    std::vector<std::vector<int32_t>> systems = {tokens(int(rng() % uint32_t(capacity / 3)), 1),
                                                 tokens(int(rng() % uint32_t(capacity / 2)), 100)};
    struct Req {
      std::vector<int32_t> prompt;
      int n_output, n;
      bool aborted;
    };
    std::map<uint64_t, Req> reqs;
    auto add_random = [&] {
      std::vector<int32_t> prompt = systems[rng() % 2];
      for (int i = 1 + int(rng() % 12); i > 0; --i) prompt.push_back(int32_t(rng() % 1000));
      const int n = rng() % 5 == 0 ? 1 + int(rng() % std::min(3u, uint32_t(sim.scheduler.options().max_num_seqs))) : 1;
      const int n_output = 1 + int(rng() % 16);
      if (int(prompt.size()) + n_output > capacity) return;
      const uint64_t id = sim.add(prompt, n_output, int(rng() % 3), n);
      reqs[id] = {prompt, n_output, n, false};
    };
    for (int i = 0; i < 6; ++i) add_random();
    for (int step = 0; sim.scheduler.has_work() || step < 100; ++step) {
      ASSERT_LT(step, 20000) << "seed " << seed;
      if (step < 100 && rng() % 2 == 0) add_random();
      if (rng() % 40 == 0 && !reqs.empty()) {
        auto it = std::next(reqs.begin(), ptrdiff_t(rng() % reqs.size()));
        if (!it->second.aborted) {
          it->second.aborted = true;
          sim.abort(it->first);
        }
      }
      if (sim.scheduler.has_work()) sim.step();
      if (HasFatalFailure()) FAIL() << "seed " << seed;
    }
    for (const auto& [id, req] : reqs) {
      if (req.aborted) continue;
      for (int i = 0; i < req.n; ++i) {
        ASSERT_TRUE(sim.outputs().count({id, i})) << "seed " << seed << " request " << id;
        EXPECT_EQ(sim.outputs().at({id, i}), expected_output(req.prompt, i, req.n_output)) << "seed " << seed;
      }
    }
    for (int k = 0; k < sim.kv.n_kinds(); ++k) EXPECT_EQ(sim.kv.pool(k).n_free(), n_blocks) << "seed " << seed;
  }
}

}  // namespace
}  // namespace deepinfer::test
