#include "engine/draft_gate.h"

#include <algorithm>

#include "core/check.h"

namespace deepinfer {

namespace {
constexpr double kCostAverageWeight = 0.2;  // of the newest measurement in the moving average
}

Status DraftGateOptions::validate() const {
  if (window < 1) return Status::Error("speculative acceptance window must be at least 1 step");
  if (!(min_acceptance >= 0.0 && min_acceptance <= 1.0))
    return Status::Error("speculative minimum acceptance must be in [0, 1]");
  if (probe_interval < 1) return Status::Error("speculative probe interval must be at least 1 step");
  if (max_rejected_steps < 1) return Status::Error("speculative rejected-step limit must be at least 1 step");
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

double DraftGate::threshold() const {
  if (options_.min_acceptance == 0) return 0;
  return options_.adaptive ? std::min(1.0, options_.min_acceptance + draft_cost_) : options_.min_acceptance;
}

bool DraftGate::window_full_and_below(const Window& w) const {
  return int(w.outcomes.size()) == options_.window && w.below(threshold());
}

void DraftGate::pause(SeqState& s) {
  s.n_pause_left = options_.probe_interval;
  s.paused = true;
  s.length = 1;
  s.n_rejected_run = 0;
}

int DraftGate::draft_length(int64_t seq_id, int k_max) {
  DI_CHECK(k_max >= 1);
  if (options_.min_acceptance == 0) return k_max;
  auto [it, is_new] = seqs_.try_emplace(seq_id);
  SeqState& s = it->second;
  if (is_new && window_full_and_below(recent_)) {
    s.window = recent_;
    pause(s);
  }
  if (options_.adaptive && s.n_rejected_run > 0) {
    const bool server_failing = recent_.outcomes.size() >= 2 && recent_.below(threshold());
    const bool costly = draft_cost_ >= options_.min_acceptance;  // drafting costs what verifying does
    if (s.n_rejected_run >= (server_failing || costly ? 1 : options_.max_rejected_steps)) pause(s);
  }
  if (s.n_pause_left == 0) return options_.adaptive ? std::min(s.length, k_max) : k_max;
  --s.n_pause_left;
  ++n_paused_steps_;
  return 0;
}

void DraftGate::record(int64_t seq_id, int n_drafted, int n_accepted) {
  DI_CHECK(n_drafted >= 1 && n_accepted >= 0 && n_accepted <= n_drafted);
  if (options_.min_acceptance == 0) return;
  const Outcome o{n_drafted, n_accepted};
  recent_.push(o, options_.window);
  SeqState& s = seqs_[seq_id];
  if (s.paused && double(n_accepted) >= threshold() * double(n_drafted)) s.window = Window{};
  s.paused = false;
  s.window.push(o, options_.window);
  s.length = n_accepted == n_drafted ? n_drafted + 1 : n_accepted + 1;
  s.n_rejected_run = n_accepted == 0 ? s.n_rejected_run + 1 : 0;
  if (window_full_and_below(s.window)) pause(s);
}

void DraftGate::record_draft_cost(double draft_seconds, int n_drafts, double step_seconds) {
  DI_CHECK(n_drafts >= 1 && step_seconds > 0 && draft_seconds >= 0);
  if (!options_.measure_draft_cost) return;
  const double cost = draft_seconds / double(n_drafts) / step_seconds;
  draft_cost_ = draft_cost_measured_ ? (1 - kCostAverageWeight) * draft_cost_ + kCostAverageWeight * cost : cost;
  draft_cost_measured_ = true;
}

}  // namespace deepinfer
