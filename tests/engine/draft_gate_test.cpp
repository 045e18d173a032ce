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

TEST(DraftGate, GoodProbesResumeDrafting) {
  const DraftGateOptions o{4, 0.4, 5};
  DraftGate gate(o);
  drafted_steps(gate, 3, 4, 3, 0);  // a window of rejections: paused
  EXPECT_FALSE(gate.should_draft(3));
  // Probes that are accepted whole replace the window's rejections one by one: 6 of 12 after two.
  const auto drafted = drafted_steps(gate, 3, 4 + o.probe_interval + 1 + 10, 3, 3);
  int n_paused = 0;
  for (bool d : drafted) n_paused += !d;
  EXPECT_EQ(n_paused, (o.probe_interval - 1) + o.probe_interval);  // before the first and second probes
  for (size_t i = drafted.size() - 10; i < drafted.size(); ++i) EXPECT_TRUE(drafted[i]) << i;
}

TEST(DraftGate, SequencesAreIndependentAndRemovedOnesStartOver) {
  DraftGate gate({2, 0.5, 100});
  drafted_steps(gate, 1, 2, 2, 0);
  EXPECT_FALSE(gate.should_draft(1));
  EXPECT_TRUE(gate.should_draft(2));
  gate.remove(1);
  EXPECT_TRUE(gate.should_draft(1));
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
