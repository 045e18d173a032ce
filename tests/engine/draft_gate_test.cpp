// DraftGate: per-sequence draft length and switch-off of speculative drafting by measured
// acceptance and cost, without a model (the engine's use of it is in engine_core_test.cpp).
#include "engine/draft_gate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace deepinfer {
namespace {

// Which of n decode steps draft (the fixed-length gate), when every drafted step has k drafts of
// which `accepted` pass.
std::vector<bool> drafted_steps(DraftGate& gate, int64_t seq, int n, int k, int accepted) {
  std::vector<bool> drafted;
  for (int i = 0; i < n; ++i) {
    const int length = gate.draft_length(seq, k);
    EXPECT_TRUE(length == 0 || length == k) << i;
    drafted.push_back(length > 0);
    if (drafted.back()) gate.record(seq, k, accepted);
  }
  return drafted;
}

// The draft length of each of n decode steps (adaptive gate, at most k_max), when a step of
// length L accepts accepted(L) drafts.
template <typename Accepted>
std::vector<int> lengths(DraftGate& gate, int64_t seq, int n, int k_max, Accepted accepted) {
  std::vector<int> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(gate.draft_length(seq, k_max));
    if (out.back() > 0) gate.record(seq, out.back(), accepted(out.back()));
  }
  return out;
}

TEST(DraftGate, AlwaysRejectedDraftsStopAfterTheWindowThenProbeEveryInterval) {
  const DraftGateOptions o{4, 0.4, 10, false};
  DraftGate gate(o);
  const auto drafted = drafted_steps(gate, 7, 200, 3, 0);
  for (int i = 0; i < o.window; ++i) EXPECT_TRUE(drafted[size_t(i)]) << i;
  // Then probe_interval steps held back before each probe.
  int n_drafted = o.window;
  for (int i = o.window; i < 200; ++i) {
    const bool probe = (i - o.window) % (o.probe_interval + 1) == o.probe_interval;
    EXPECT_EQ(drafted[size_t(i)], probe) << i;
    n_drafted += probe;
  }
  EXPECT_EQ(n_drafted, o.window + (200 - o.window) / (o.probe_interval + 1));
  EXPECT_EQ(gate.n_paused_steps(), uint64_t(200 - n_drafted));
}

TEST(DraftGate, AcceptanceAtTheThresholdKeepsDrafting) {
  DraftGate gate({4, 0.5, 10, false});
  for (bool d : drafted_steps(gate, 1, 50, 4, 2)) EXPECT_TRUE(d);  // 2 of 4: exactly 0.5
  for (bool d : drafted_steps(gate, 2, 50, 3, 3)) EXPECT_TRUE(d);
  EXPECT_EQ(gate.n_paused_steps(), 0u);
  DraftGate never_off({4, 0.0, 10});
  for (bool d : drafted_steps(never_off, 1, 50, 3, 0)) EXPECT_TRUE(d);
}

TEST(DraftGate, AGoodProbeResumesDrafting) {
  const DraftGateOptions o{4, 0.4, 5, false};
  DraftGate gate(o);
  drafted_steps(gate, 3, 4, 3, 0);  // a window of rejections: paused
  EXPECT_EQ(gate.draft_length(3, 3), 0);
  // The probe after the pause is accepted whole: drafting resumes at once, from a fresh window.
  const auto drafted = drafted_steps(gate, 3, o.probe_interval - 1 + 1 + 10, 3, 3);
  for (int i = 0; i < o.probe_interval - 1; ++i) EXPECT_FALSE(drafted[size_t(i)]) << i;
  for (size_t i = size_t(o.probe_interval - 1); i < drafted.size(); ++i) EXPECT_TRUE(drafted[i]) << i;
  // A probe below the threshold joins the window: with it the window is still below, so it pauses.
  drafted_steps(gate, 3, 4, 3, 0);  // the window: 3 of 12 accepted
  EXPECT_EQ(gate.draft_length(3, 3), 0);
}

TEST(DraftGate, NewSequencesStartFromTheServersRecentOutcomes) {
  const DraftGateOptions o{2, 0.5, 10, false};
  DraftGate gate(o);
  drafted_steps(gate, 1, 2, 2, 0);  // the server's last 2 drafted steps: all rejected
  EXPECT_EQ(gate.draft_length(1, 2), 0);
  // A new sequence starts paused and probes after probe_interval steps.
  const auto drafted = drafted_steps(gate, 2, o.probe_interval + 1, 2, 2);
  for (int i = 0; i < o.probe_interval; ++i) EXPECT_FALSE(drafted[size_t(i)]) << i;
  EXPECT_TRUE(drafted.back());
  drafted_steps(gate, 2, 1, 2, 2);  // its good probes are now the server's last 2 steps
  EXPECT_EQ(gate.draft_length(3, 2), 2);  // so a new sequence drafts at once
  gate.remove(1);
  EXPECT_EQ(gate.draft_length(1, 2), 2);  // a removed sequence is new again
}

TEST(DraftGate, OptionsOutOfRangeAreErrors) {
  EXPECT_TRUE(DraftGateOptions{}.validate().ok());
  EXPECT_FALSE((DraftGateOptions{0, 0.4, 32}).validate().ok());
  EXPECT_FALSE((DraftGateOptions{6, 1.5, 32}).validate().ok());
  EXPECT_FALSE((DraftGateOptions{6, -0.1, 32}).validate().ok());
  EXPECT_FALSE((DraftGateOptions{6, 0.4, 0}).validate().ok());
  EXPECT_FALSE((DraftGateOptions{6, 0.4, 32, true, 0}).validate().ok());
}

// Adaptive: the length starts at 1 and grows by one per fully accepted step up to k_max (which the
// engine may lower near the end of an output); a partial acceptance of m sets it to m + 1.
TEST(DraftGate, AdaptiveLengthGrowsWhileAcceptedAndFollowsPartialAcceptance) {
  DraftGate gate;
  EXPECT_EQ(lengths(gate, 1, 6, 4, [](int l) { return l; }), (std::vector<int>{1, 2, 3, 4, 4, 4}));
  EXPECT_EQ(gate.draft_length(1, 2), 2);
  gate.record(1, 2, 2);
  EXPECT_EQ(gate.draft_length(1, 4), 3);
  gate.record(1, 3, 1);  // 1 of 3: next 2
  EXPECT_EQ(gate.draft_length(1, 4), 2);
  gate.record(1, 2, 0);  // none: next 1
  EXPECT_EQ(gate.draft_length(1, 4), 1);
  EXPECT_EQ(gate.n_paused_steps(), 0u);
}

// Adaptive, a drafter that is never right: on a fresh server a sequence drafts 1 token on
// max_rejected_steps steps, then only probes of 1 token, each followed by a pause at once (the
// server's record is failing by then); every drafted step has length 1.
TEST(DraftGate, AdaptiveNeverRightDraftsPauseAfterTheFirstRejectedSteps) {
  const DraftGateOptions o{6, 0.4, 10, true, 2};
  DraftGate gate(o);
  const auto l = lengths(gate, 7, 200, 3, [](int) { return 0; });
  int n_drafted = 0;
  for (int i = 0; i < 200; ++i) {
    const bool expect = i < 2 || (i - 2) % (o.probe_interval + 1) == o.probe_interval;
    EXPECT_EQ(l[size_t(i)], expect ? 1 : 0) << i;
    n_drafted += expect;
  }
  EXPECT_EQ(gate.n_paused_steps(), uint64_t(200 - n_drafted));
  // A second sequence, with 2 rejected steps on the server's record (less than the window): it
  // drafts once, then pauses.
  DraftGate fresh(o);
  lengths(fresh, 1, 2, 3, [](int) { return 0; });
  EXPECT_EQ(lengths(fresh, 2, 3, 3, [](int) { return 0; }), (std::vector<int>{1, 0, 0}));
  // With good drafts on the server's record, one rejected step alone does not pause.
  DraftGate good(o);
  lengths(good, 1, 4, 3, [](int l) { return l; });
  EXPECT_EQ(lengths(good, 2, 3, 3, [](int l) { return l == 1 ? 0 : l; }), (std::vector<int>{1, 1, 0}));
}

// Cost-aware: the threshold adds the drafter's measured cost per draft (a moving average) to
// min_acceptance, capped at 1; half the drafts accepted pays for a free drafter, not for one whose
// draft costs 0.3 of a step.
TEST(DraftGate, TheDraftersMeasuredCostRaisesTheThreshold) {
  const DraftGateOptions o{4, 0.4, 10, true, 2};
  DraftGate free_drafter(o), costly(o);
  EXPECT_DOUBLE_EQ(costly.threshold(), 0.4);
  costly.record_draft_cost(0.6, 2, 1.0);
  EXPECT_DOUBLE_EQ(costly.threshold(), 0.7);
  costly.record_draft_cost(0.1, 1, 1.0);  // 0.8 x 0.3 + 0.2 x 0.1
  EXPECT_NEAR(costly.threshold(), 0.66, 1e-12);
  // A first step of 1 draft accepted, then steps of 2 drafts accepting 1 (4 of 7, then 1/2).
  auto half = [](int l) { return std::max(1, l / 2); };
  lengths(free_drafter, 1, 30, 2, half);
  EXPECT_EQ(free_drafter.n_paused_steps(), 0u);
  lengths(costly, 1, 30, 2, half);
  EXPECT_GT(costly.n_paused_steps(), 0u);
  // A drafter whose draft costs at least min_acceptance pauses after 1 rejected step.
  DraftGate costly_fresh(o);
  costly_fresh.record_draft_cost(0.4, 1, 1);
  EXPECT_EQ(lengths(costly_fresh, 2, 3, 3, [](int) { return 0; }), (std::vector<int>{1, 0, 0}));
  DraftGate cheap(o);
  cheap.record_draft_cost(0.1, 1, 1);
  EXPECT_EQ(lengths(cheap, 2, 3, 3, [](int) { return 0; }), (std::vector<int>{1, 1, 0}));
  DraftGate dear(o);
  dear.record_draft_cost(5, 1, 1);
  EXPECT_DOUBLE_EQ(dear.threshold(), 1.0);
  DraftGate unmeasured({4, 0.4, 10, true, 2, false});
  unmeasured.record_draft_cost(5, 1, 1);
  EXPECT_DOUBLE_EQ(unmeasured.threshold(), 0.4);
  DraftGate off({4, 0.0, 10});
  off.record_draft_cost(5, 1, 1);
  EXPECT_DOUBLE_EQ(off.threshold(), 0.0);
  EXPECT_EQ(lengths(off, 1, 3, 3, [](int) { return 0; }), (std::vector<int>{3, 3, 3}));  // the gate off
}

}  // namespace
}  // namespace deepinfer
