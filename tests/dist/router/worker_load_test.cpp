// Reading a worker's load from its /metrics page (as src/server/metrics.cpp renders it).
#include "dist/router/worker_load.h"

#include <gtest/gtest.h>

namespace deepinfer::router {
namespace {

TEST(WorkerLoad, ReadsTheThreeGauges) {
  const char* text =
      "# HELP deepinfer_num_requests_running Sequences running.\n"
      "# TYPE deepinfer_num_requests_running gauge\n"
      "deepinfer_num_requests_running 3\n"
      "deepinfer_num_requests_running_total 99\n"  // another name with the same start
      "deepinfer_num_requests_waiting\t2 1700000000\n"
      "deepinfer_kv_cache_usage_ratio 0.25\r\n"
      "deepinfer_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 7\n";
  auto load = parse_worker_load(text);
  ASSERT_TRUE(load.ok()) << load.status().message();
  EXPECT_DOUBLE_EQ(load->n_running, 3);
  EXPECT_DOUBLE_EQ(load->n_waiting, 2);
  EXPECT_DOUBLE_EQ(load->kv_usage, 0.25);
}

TEST(WorkerLoad, MissingOrMalformedGaugeIsAnError) {
  auto missing = parse_worker_load("deepinfer_num_requests_running 1\ndeepinfer_kv_cache_usage_ratio 0\n");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("deepinfer_num_requests_waiting"), std::string::npos);
  for (const char* bad : {"x", "nan", "-1", "1e999", ""}) {
    const std::string text = std::string("deepinfer_num_requests_running ") + bad +
                             "\ndeepinfer_num_requests_waiting 0\ndeepinfer_kv_cache_usage_ratio 0\n";
    EXPECT_FALSE(parse_worker_load(text).ok()) << bad;
  }
  EXPECT_FALSE(parse_worker_load("").ok());
}

}  // namespace
}  // namespace deepinfer::router
