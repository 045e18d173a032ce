// BackoffSchedule: when a worker that failed its health check (or a request) is checked again.
// After n consecutive failures the next check waits initial_s * factor^(n-1), at most max_s;
// a healthy worker is checked every interval_s.
#pragma once

namespace deepinfer::router {

struct BackoffSchedule {
  double interval_s = 0.5;  // between checks of a healthy worker
  double initial_s = 0.25;  // after the first failure
  double factor = 2;
  double max_s = 8;

  // Seconds until the next check after `n_failures` consecutive failures (0: healthy).
  double delay_s(int n_failures) const;
};

}  // namespace deepinfer::router
