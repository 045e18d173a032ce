// DraftGate: switches speculative drafting off, per sequence, where its drafts are mostly
// rejected. A sequence's last `window` drafted steps are kept as (drafted, accepted) token
// counts; once the window is full and accepted / drafted < min_acceptance, the sequence stops
// drafting for `probe_interval` of its decode steps, then drafts once (a probe). A probe that
// reaches min_acceptance by itself resumes drafting (the window starts over from it); one that
// does not joins the window, and the sequence pauses again while the window stays below.
// A new sequence starts from the server's recent outcomes: where the last `window` drafted steps
// of all sequences are below min_acceptance, it starts paused (and probes after probe_interval
// steps); otherwise it drafts from its first decode step.
//
// The gate only chooses which positions are drafted; verification keeps outputs those of plain
// decoding whatever it chooses (engine_core.h). Cost bound of a drafter that is never right: a
// sequence drafts on at most `window` steps (none once the server has seen `window` rejected
// steps), then on 1 step of every probe_interval + 1, so past that at most a fraction
// 1 / (probe_interval + 1) of its decode steps pays verification (a step of 1 + k rows instead
// of 1).
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
  // Accepted / drafted tokens over the window below which drafting stops, in [0, 1] (0: never
  // stops). Break-even on the V2-Lite shape at batch 1 (bench/RESULTS.md, "Speculative decoding"):
  // a step of 1 + k rows costs 1.3-2.5x one row, so k drafts pay off from ~0.35-0.4 accepted.
  double min_acceptance = 0.4;
  int probe_interval = 32;      // decode steps without drafts before a probe, >= 1

  Status validate() const;
};

class DraftGate {
 public:
  explicit DraftGate(DraftGateOptions options = {}) : options_(options) {}

  // Whether the sequence drafts at this decode step; a step it does not counts toward its probe.
  // Call once per step where it could draft.
  bool should_draft(int64_t seq_id);
  // The outcome of a drafted step: n_drafted >= 1 drafts verified, n_accepted of them accepted.
  void record(int64_t seq_id, int n_drafted, int n_accepted);
  // Forgets a finished sequence.
  void remove(int64_t seq_id) { seqs_.erase(seq_id); }

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
    bool full_and_below(const DraftGateOptions& options) const;
  };
  struct SeqState {
    Window window;
    int n_pause_left = 0;  // decode steps still without drafts
    bool paused = false;   // since the last pause began; the next drafted step is a probe
  };

  DraftGateOptions options_;
  std::unordered_map<int64_t, SeqState> seqs_;
  Window recent_;  // of all sequences
  uint64_t n_paused_steps_ = 0;
};

}  // namespace deepinfer
