#include "engine/draft_gate.h"

#include "core/check.h"

namespace deepinfer {

Status DraftGateOptions::validate() const {
  if (window < 1) return Status::Error("speculative acceptance window must be at least 1 step");
  if (!(min_acceptance >= 0.0 && min_acceptance <= 1.0))
    return Status::Error("speculative minimum acceptance must be in [0, 1]");
  if (probe_interval < 1) return Status::Error("speculative probe interval must be at least 1 step");
  return Status::Ok();
}

bool DraftGate::should_draft(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end() || it->second.n_pause_left == 0) return true;
  --it->second.n_pause_left;
  ++n_paused_steps_;
  return false;
}

void DraftGate::record(int64_t seq_id, int n_drafted, int n_accepted) {
  DI_CHECK(n_drafted >= 1 && n_accepted >= 0 && n_accepted <= n_drafted);
  SeqState& s = seqs_[seq_id];
  s.window.push_back({n_drafted, n_accepted});
  s.n_drafted += n_drafted;
  s.n_accepted += n_accepted;
  if (int(s.window.size()) > options_.window) {
    s.n_drafted -= s.window.front().n_drafted;
    s.n_accepted -= s.window.front().n_accepted;
    s.window.pop_front();
  }
  if (int(s.window.size()) == options_.window &&
      double(s.n_accepted) < options_.min_acceptance * double(s.n_drafted))
    s.n_pause_left = options_.probe_interval;
}

}  // namespace deepinfer
