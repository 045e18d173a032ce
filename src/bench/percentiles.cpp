#include "bench/percentiles.h"

#include "core/check.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace deepinfer::bench {

double percentile(const std::vector<double>& sorted, double q) {
  DI_CHECK(!sorted.empty() && q >= 0 && q <= 100);
  const double rank = q / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - static_cast<double>(lo));
}

Percentiles summarize(std::vector<double> values) {
  Percentiles p;
  if (values.empty()) return p;
  std::sort(values.begin(), values.end());
  p.n = static_cast<long>(values.size());
  p.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  p.median = percentile(values, 50);
  p.p10 = percentile(values, 10);
  p.p90 = percentile(values, 90);
  p.p99 = percentile(values, 99);
  return p;
}

}  // namespace deepinfer::bench
