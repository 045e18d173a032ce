// Percentiles over samples, with linear interpolation between closest ranks (NumPy's default
// "linear" method, which vLLM's and guidellm's reports use): q in [0, 100].
#pragma once

#include <vector>

namespace deepinfer::bench {

struct Percentiles {
  long n = 0;
  double mean = 0, median = 0, p10 = 0, p90 = 0, p99 = 0;  // all 0 when n == 0
};

// `values` in any order.
Percentiles summarize(std::vector<double> values);
// `sorted` ascending and non-empty.
double percentile(const std::vector<double>& sorted, double q);

}  // namespace deepinfer::bench
