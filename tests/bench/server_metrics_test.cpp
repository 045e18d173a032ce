#include "bench/server_metrics.h"

#include <gtest/gtest.h>

namespace deepinfer::bench {
namespace {

TEST(ServerMetricsTest, ReadsVllmStyleCountersAndGauges) {
  const ServerMetrics m = parse_server_metrics(
      "# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n"
      "# TYPE vllm:kv_cache_usage_perc gauge\n"
      "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.25\n"
      "vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"m\"} 0.75\n"
      "vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"m\"} 1000.0\n"
      "vllm:prefix_cache_queries_total{engine=\"1\",model_name=\"m\"} 500.0\n"
      "vllm:prefix_cache_queries_created{engine=\"0\",model_name=\"m\"} 1.7e9\n"
      "vllm:prefix_cache_hits_total{engine=\"0\",model_name=\"m\"} 600\n"
      "vllm:num_requests_running{engine=\"0\"} 3\n");
  EXPECT_DOUBLE_EQ(*m.kv_usage, 0.5);  // ratios average over label sets
  EXPECT_DOUBLE_EQ(*m.prefix_queries, 1500);  // counters add up
  EXPECT_DOUBLE_EQ(*m.prefix_hits, 600);
  EXPECT_FALSE(m.prefix_hit_rate);
}

TEST(ServerMetricsTest, ReadsDeepInferNames) {
  const ServerMetrics m = parse_server_metrics(
      "# TYPE deepinfer_prompt_tokens_total counter\n"
      "deepinfer_prompt_tokens_total 900\n"
      "deepinfer_cached_prompt_tokens_total 600\n"
      "deepinfer_generation_tokens_total 50\n"
      "deepinfer_kv_cache_usage_ratio 0.125\n");
  EXPECT_DOUBLE_EQ(*m.kv_usage, 0.125);
  EXPECT_DOUBLE_EQ(*m.prefix_queries, 900);
  EXPECT_DOUBLE_EQ(*m.prefix_hits, 600);
  // Prompt-token counters alone (no cached counterpart) say nothing about the prefix cache.
  EXPECT_FALSE(parse_server_metrics("vllm:prompt_tokens_total 10\n").prefix_queries);
}

TEST(ServerMetricsTest, ReadsOtherEnginesNames) {
  const ServerMetrics sglang = parse_server_metrics("sglang:token_usage{model_name=\"m\"} 0.1\nsglang:cache_hit_rate 0.4 1700000000\n");
  EXPECT_DOUBLE_EQ(*sglang.kv_usage, 0.1);
  EXPECT_DOUBLE_EQ(*sglang.prefix_hit_rate, 0.4);
  const ServerMetrics llama = parse_server_metrics("llamacpp:kv_cache_usage_ratio 0.3\n");
  EXPECT_DOUBLE_EQ(*llama.kv_usage, 0.3);
  EXPECT_TRUE(parse_server_metrics("# nothing\nprocess_cpu_seconds_total 12\ngarbage line\nvllm:kv_cache_usage_perc NaN\nmy_token_usage_total_x 1\n").empty());
}

// Speculative counters, with their per-position label, as DeepInfer's /metrics writes them and as
// vLLM names them.
TEST(ServerMetricsTest, ReadsSpeculativeCounters) {
  const ServerMetrics m = parse_server_metrics(
      "# TYPE deepinfer_spec_decode_draft_tokens_total counter\n"
      "deepinfer_spec_decode_draft_tokens_total 90\n"
      "deepinfer_spec_decode_accepted_tokens_total 40\n"
      "deepinfer_spec_decode_draft_tokens_per_pos_total{position=\"0\"} 50\n"
      "deepinfer_spec_decode_draft_tokens_per_pos_total{position=\"1\"} 40\n"
      "deepinfer_spec_decode_accepted_tokens_per_pos_total{position=\"0\"} 30\n"
      "deepinfer_spec_decode_accepted_tokens_per_pos_total{position=\"1\"} 10\n");
  EXPECT_DOUBLE_EQ(*m.spec_draft_tokens, 90);
  EXPECT_DOUBLE_EQ(*m.spec_accepted_tokens, 40);
  EXPECT_FALSE(m.spec_drafts);
  EXPECT_EQ(m.spec_draft_tokens_at, (std::vector<double>{50, 40}));
  EXPECT_EQ(m.spec_accepted_tokens_at, (std::vector<double>{30, 10}));
  EXPECT_FALSE(m.empty());

  const ServerMetrics v = parse_server_metrics(
      "vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m\"} 7.0\n"
      "vllm:spec_decode_num_draft_tokens_total{engine=\"0\",model_name=\"m\"} 21.0\n"
      "vllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"m\"} 9.0\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",model_name=\"m\",position=\"2\"} 1.0\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"1\",model_name=\"m\",position=\"2\"} 1.0\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",token_position=\"1\"} 5.0\n");
  EXPECT_DOUBLE_EQ(*v.spec_drafts, 7);
  EXPECT_DOUBLE_EQ(*v.spec_draft_tokens, 21);
  EXPECT_DOUBLE_EQ(*v.spec_accepted_tokens, 9);
  EXPECT_EQ(v.spec_accepted_tokens_at, (std::vector<double>{0, 0, 2}));  // summed over engines
  EXPECT_TRUE(v.spec_draft_tokens_at.empty());
  // Positions that are not small indices are skipped.
  EXPECT_TRUE(parse_server_metrics("x_spec_decode_accepted_tokens_per_pos{position=\"99999\"} 1\n"
                                   "x_spec_decode_accepted_tokens_per_pos{position=\"-1\"} 1\n"
                                   "x_spec_decode_accepted_tokens_per_pos{position=\"\"} 1\n")
                  .spec_accepted_tokens_at.empty());
}

}  // namespace
}  // namespace deepinfer::bench
