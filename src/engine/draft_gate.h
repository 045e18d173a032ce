// DraftGate: chooses, per sequence and decode step, how many speculative drafts to verify (0:
// none), from the drafts' measured acceptance and cost, so that a drafter that loses switches
// itself off after its first steps.
//
// Acceptance threshold: a drafted step pays when its drafts' accepted fraction exceeds what a draft
// costs relative to a plain step: verifying it (min_acceptance, the extra row) plus proposing it
// (the drafter's own cost, measured: record_draft_cost; an n-gram lookup is ~0, an MTP chain step
// runs a decoder layer and a vocabulary head). threshold() = min(1, min_acceptance + draft cost)
// (adaptive; otherwise min_acceptance).
//
// Pausing: a sequence's last `window` drafted steps are kept as (drafted, accepted) token counts;
// once the window is full and below the threshold, the sequence stops drafting for
// `probe_interval` of its decode steps, then drafts once (a probe). A probe at or above the
// threshold by itself resumes drafting (the window starts over from it); one below joins the
// window, and the sequence pauses again while the window stays below. A new sequence starts from
// the server's recent outcomes: where the last `window` drafted steps of all sequences are below
// the threshold, it starts paused (and probes after probe_interval steps).
//
// Adaptive (options.adaptive, the default): besides the window,
//   - draft length: a sequence (and each probe) starts at 1 draft; a step whose drafts are all
//     accepted lets the next draft one more (up to the k the engine allows); a step that accepts
//     m < n drafts lets the next draft m + 1. An always-right drafter reaches k after k - 1 steps.
//   - fast pause: a sequence pauses after `max_rejected_steps` drafted steps in a row with nothing
//     accepted, or after 1 where the server's recent record (at least 2 drafted steps, up to
//     `window`) is below the threshold or where the drafter's measured cost per draft is at least
//     min_acceptance (a rejected draft then wastes twice what a verified row costs).
// Not adaptive: every drafted step drafts k, only the window pauses, and the threshold is
// min_acceptance alone.
// min_acceptance = 0 switches the gate off: every step drafts k.
//
// The gate only chooses which positions are drafted; verification keeps outputs those of plain
// decoding whatever it chooses (engine_core.h). Cost bound of a drafter that is never right,
// adaptive: a fresh sequence on a fresh server drafts 1 token on at most max_rejected_steps
// steps (1 once 2 rejected steps are on record or for a costly drafter, none once `window` are),
// then 1 token on 1 step of
// every probe_interval + 1; a step with 1 draft costs c1 = (1-row step + 1 verified row + 1
// draft) / (1-row step), so past the start the overhead is (c1 - 1) / (probe_interval + 1) of
// plain decoding's time (bench/RESULTS.md, "Speculative decoding", gives c1).
//
// Pure logic keyed by sequence id, engine thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>

#include "core/status.h"

namespace deepinfer {

struct DraftGateOptions {
  int window = 6;               // drafted steps whose acceptance decides, >= 1
  // Accepted / drafted tokens below which drafting stops, before the drafter's own cost, in
  // [0, 1] (0: the gate is off). Break-even on the V2-Lite shape at batch 1 (bench/RESULTS.md,
  // "Speculative decoding"): a verified row costs 0.3-0.4 of a 1-row step.
  double min_acceptance = 0.4;
  int probe_interval = 32;      // decode steps without drafts before a probe, >= 1
  bool adaptive = true;         // draft length and fast pause as above
  int max_rejected_steps = 2;   // adaptive: drafted steps in a row with nothing accepted, >= 1
  // Adaptive: whether record_draft_cost counts (false: the drafter is taken as free, so the
  // gate's choices do not depend on timing; tests use it).
  bool measure_draft_cost = true;

  Status validate() const;
};

class DraftGate {
 public:
  explicit DraftGate(DraftGateOptions options = {}) : options_(options) {}

  // How many drafts (0 .. k_max) the sequence verifies at this decode step; a step without counts
  // toward its probe. Call once per step where it could draft k_max >= 1.
  int draft_length(int64_t seq_id, int k_max);
  // The outcome of a drafted step: n_drafted >= 1 drafts verified, n_accepted of them accepted.
  void record(int64_t seq_id, int n_drafted, int n_accepted);
  // The measured cost of proposing drafts: n_drafts >= 1 drafts took draft_seconds, against a
  // step (forward pass) of step_seconds > 0. Kept as a moving average of the cost per draft
  // (ignored unless options.measure_draft_cost).
  void record_draft_cost(double draft_seconds, int n_drafts, double step_seconds);
  // Forgets a finished sequence.
  void remove(int64_t seq_id) { seqs_.erase(seq_id); }

  // The accepted fraction of drafts below which a sequence pauses (see above).
  double threshold() const;
  // Decode steps on which a sequence held back its drafts, since start.
  uint64_t n_paused_steps() const { return n_paused_steps_; }

 private:
  struct Outcome {
    int n_drafted, n_accepted;
  };
  // The last `window` outcomes with their sums.
  struct Window {
    std::deque<Outcome> outcomes;
    int64_t n_drafted = 0, n_accepted = 0;
    void push(Outcome o, int size);
    bool below(double threshold) const { return double(n_accepted) < threshold * double(n_drafted); }
  };
  struct SeqState {
    Window window;
    int n_pause_left = 0;   // decode steps still without drafts
    bool paused = false;    // since the last pause began; the next drafted step is a probe
    int length = 1;         // adaptive: drafts at the next drafted step
    int n_rejected_run = 0; // adaptive: drafted steps in a row with nothing accepted
  };
  bool window_full_and_below(const Window& w) const;
  void pause(SeqState& s);

  DraftGateOptions options_;
  std::unordered_map<int64_t, SeqState> seqs_;
  Window recent_;  // of all sequences
  double draft_cost_ = 0;  // per draft, relative to a step; 0 until measured
  bool draft_cost_measured_ = false;
  uint64_t n_paused_steps_ = 0;
};

}  // namespace deepinfer
