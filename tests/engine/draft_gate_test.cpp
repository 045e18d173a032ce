// DraftGate: per-sequence switch-off of speculative drafting by measured acceptance, without a
// model (the engine's use of it is in engine_core_test.cpp).
#include "engine/draft_gate.h"

#include <gtest/gtest.h>

#include <vector>

namespace deepinfer {
namespace {

// Which of n decode steps draft, when every drafted step has k drafts of which `accepted` pass.
std::vector<bool> drafted_steps(DraftGate& gate, int64_t seq, int n, int k, int accepted) {
  std::vector<bool> drafted;
  for (int i = 0; i < n; ++i) {
    drafted.push_back(gate.should_draft(seq));
    if (drafted.back()) gate.record(seq, k, accepted);
  }
  return drafted;
}

TEST(DraftGate, AlwaysRejectedDraftsStopAfterTheWindowThenProbeEveryInterval) {
  const DraftGateOptions o{4, 0.4, 10};
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
  DraftGate gate({4, 0.5, 10});
  for (bool d : drafted_steps(gate, 1, 50, 4, 2)) EXPECT_TRUE(d);  // 2 of 4: exactly 0.5
  for (bool d : drafted_steps(gate, 2, 50, 3, 3)) EXPECT_TRUE(d);
  EXPECT_EQ(gate.n_paused_steps(), 0u);
  DraftGate never_off({4, 0.0, 10});
  for (bool d : drafted_steps(never_off, 1, 50, 3, 0)) EXPECT_TRUE(d);
}

TEST(DraftGate, AGoodProbeResumesDrafting) {
  const DraftGateOptions o{4, 0.4, 5};
  DraftGate gate(o);
  drafted_steps(gate, 3, 4, 3, 0);  // a window of rejections: paused
  EXPECT_FALSE(gate.should_draft(3));
  // The probe after the pause is accepted whole: drafting resumes at once, from a fresh window.
  const auto drafted = drafted_steps(gate, 3, o.probe_interval - 1 + 1 + 10, 3, 3);
  for (int i = 0; i < o.probe_interval - 1; ++i) EXPECT_FALSE(drafted[size_t(i)]) << i;
  for (size_t i = size_t(o.probe_interval - 1); i < drafted.size(); ++i) EXPECT_TRUE(drafted[i]) << i;
  // A probe below the threshold joins the window: with it the window is still below, so it pauses.
  drafted_steps(gate, 3, 4, 3, 0);  // the window: 3 of 12 accepted
  EXPECT_FALSE(gate.should_draft(3));
}

TEST(DraftGate, NewSequencesStartFromTheServersRecentOutcomes) {
  const DraftGateOptions o{2, 0.5, 10};
  DraftGate gate(o);
  drafted_steps(gate, 1, 2, 2, 0);  // the server's last 2 drafted steps: all rejected
  EXPECT_FALSE(gate.should_draft(1));
  // A new sequence starts paused and probes after probe_interval steps.
  const auto drafted = drafted_steps(gate, 2, o.probe_interval + 1, 2, 2);
  for (int i = 0; i < o.probe_interval; ++i) EXPECT_FALSE(drafted[size_t(i)]) << i;
  EXPECT_TRUE(drafted.back());
  drafted_steps(gate, 2, 1, 2, 2);  // its good probes are now the server's last 2 steps
  EXPECT_TRUE(gate.should_draft(3));  // so a new sequence drafts at once
  gate.remove(1);
  EXPECT_TRUE(gate.should_draft(1));  // a removed sequence is new again
}

TEST(DraftGate, OptionsOutOfRangeAreErrors) {
  EXPECT_TRUE(DraftGateOptions{}.validate().ok());
  EXPECT_FALSE((DraftGateOptions{0, 0.4, 32}).validate().ok());
  EXPECT_FALSE((DraftGateOptions{6, 1.5, 32}).validate().ok());
  EXPECT_FALSE((DraftGateOptions{6, -0.1, 32}).validate().ok());
  EXPECT_FALSE((DraftGateOptions{6, 0.4, 0}).validate().ok());
}

}  // namespace
}  // namespace deepinfer
