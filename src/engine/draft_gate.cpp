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

void DraftGate::Window::push(Outcome o, int size) {
  outcomes.push_back(o);
  n_drafted += o.n_drafted;
  n_accepted += o.n_accepted;
  if (int(outcomes.size()) > size) {
    n_drafted -= outcomes.front().n_drafted;
    n_accepted -= outcomes.front().n_accepted;
    outcomes.pop_front();
  }
}

bool DraftGate::Window::full_and_below(const DraftGateOptions& options) const {
  return int(outcomes.size()) == options.window && double(n_accepted) < options.min_acceptance * double(n_drafted);
}

bool DraftGate::should_draft(int64_t seq_id) {
  auto [it, is_new] = seqs_.try_emplace(seq_id);
  SeqState& s = it->second;
  if (is_new && recent_.full_and_below(options_)) {
    s.window = recent_;
    s.n_pause_left = options_.probe_interval;
    s.paused = true;
  }
  if (s.n_pause_left == 0) return true;
  --s.n_pause_left;
  ++n_paused_steps_;
  return false;
}

void DraftGate::record(int64_t seq_id, int n_drafted, int n_accepted) {
  DI_CHECK(n_drafted >= 1 && n_accepted >= 0 && n_accepted <= n_drafted);
  const Outcome o{n_drafted, n_accepted};
  recent_.push(o, options_.window);
  SeqState& s = seqs_[seq_id];
  if (s.paused && double(n_accepted) >= options_.min_acceptance * double(n_drafted)) s.window = Window{};
  s.paused = false;
  s.window.push(o, options_.window);
  if (s.window.full_and_below(options_)) {
    s.n_pause_left = options_.probe_interval;
    s.paused = true;
  }
}

}  // namespace deepinfer
