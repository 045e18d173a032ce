// for_each_row (model/for_each_row.h): every row runs once, and a single row's kernels open their
// parallel regions as top-level ones (level 1, every thread of the pool), not nested ones.
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <vector>

#include "model/for_each_row.h"

namespace deepinfer {
namespace {

TEST(ForEachRow, RunsEveryRowOnce) {
  for (int64_t n : {0, 1, 2, 7}) {
    std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
    for_each_row(n, [&](int64_t i) { runs[size_t(i)].fetch_add(1); });
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(runs[size_t(i)].load(), 1) << "n " << n << ", row " << i;
  }
}

TEST(ForEachRow, ASingleRowsKernelsGetThePool) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(2);
  int level = -1, threads = -1;
  for_each_row(1, [&](int64_t) {
#pragma omp parallel
    {
#pragma omp single
      {
        level = omp_get_level();
        threads = omp_get_num_threads();
      }
    }
  });
  omp_set_num_threads(saved);
  EXPECT_EQ(level, 1) << "a region inside a single row is nested";
  EXPECT_EQ(threads, 2);
}

}  // namespace
}  // namespace deepinfer
