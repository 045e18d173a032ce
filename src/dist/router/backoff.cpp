#include "dist/router/backoff.h"

#include <algorithm>

namespace deepinfer::router {

double BackoffSchedule::delay_s(int n_failures) const {
  if (n_failures <= 0) return interval_s;
  double d = initial_s;
  for (int i = 1; i < n_failures && d < max_s; ++i) d *= factor;
  return std::min(d, max_s);
}

}  // namespace deepinfer::router
