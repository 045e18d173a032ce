// engine_offline_bench: offline throughput of the engine on a checkpoint. For each concurrency
// level N, N requests of --prompt-len random prompt tokens and --output-len greedy output tokens
// (ignore_eos) are submitted at once and run to completion on one EngineCore (no HTTP, no
// tokenizer). Reports output tokens/s and total (prompt + output) tokens/s over the wall time,
// the mean step time, the process CPU time (all threads), the 1-minute load average at the end
// (the machine may be shared), and the KV cache's bytes per token; one JSON object per line with
// --json.
//
//   engine_offline_bench --model DIR [--concurrency 1,8,32,64,128,256] [--kv-cache-dtype bf16]
//       [--prompt-len 128] [--output-len 32] [--max-num-batched-tokens 2048]
//       [--kv-cache-memory BYTES] [--threads N] [--json]
#include <CLI/CLI.hpp>
#include <omp.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine_core.h"
#include "model/loader.h"

namespace deepinfer {
namespace {

struct BenchOptions {
  std::string model_dir;
  std::string concurrency = "1,8,32,64,128,256";
  std::string kv_cache_dtype = "bf16";
  int prompt_len = 128;
  int output_len = 32;
  int max_num_batched_tokens = 2048;
  size_t kv_cache_memory = size_t(4) << 30;
  int threads = 0;
  bool json = false;
};

double load_average() {
  std::ifstream f("/proc/loadavg");
  double one_minute = -1;
  f >> one_minute;
  return one_minute;
}

int run(const BenchOptions& o) {
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const auto dtype = parse_kv_cache_dtype(o.kv_cache_dtype);
  if (!dtype) {
    std::fprintf(stderr, "error: --kv-cache-dtype: '%s' is not one of bf16, fp8, f32\n", o.kv_cache_dtype.c_str());
    return 1;
  }
  const auto t_load = std::chrono::steady_clock::now();
  auto model = load_causal_lm(o.model_dir);
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", model.status().message().c_str());
    return 1;
  }
  std::fprintf(stderr, "%s (loaded in %.1f s)\n", describe_causal_lm(**model, EngineOptions{}.block_size).c_str(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count());
  const int vocab = (*model)->info().vocab_size;

  std::stringstream levels(o.concurrency);
  for (std::string item; std::getline(levels, item, ',');) {
    const int n = std::stoi(item);
    EngineOptions eo;
    eo.kv_cache_dtype = *dtype;
    eo.kv_cache_memory_bytes = o.kv_cache_memory;
    eo.max_num_batched_tokens = o.max_num_batched_tokens;
    eo.max_num_seqs = std::max(256, n);
    auto core = EngineCore::create(**model, eo);
    if (!core.ok()) {
      std::fprintf(stderr, "error: %s\n", core.status().message().c_str());
      return 1;
    }
    std::mt19937 rng{uint32_t(n)};
    std::vector<std::shared_ptr<OutputStream>> streams;
    const auto t0 = std::chrono::steady_clock::now();
    const std::clock_t cpu0 = std::clock();
    for (int i = 0; i < n; ++i) {
      Request r;
      for (int k = 0; k < o.prompt_len; ++k) r.prompt_token_ids.push_back(int32_t(rng() % uint32_t(vocab)));
      r.params.temperature = 0;
      r.params.max_tokens = o.output_len;
      r.params.ignore_eos = true;
      const Status s = (*core)->validate(r);
      if (!s.ok()) {
        std::fprintf(stderr, "error: %s\n", s.message().c_str());
        return 1;
      }
      streams.push_back(std::make_shared<OutputStream>(1));
      (*core)->add(uint64_t(i), std::move(r), streams.back(), t0);
    }
    while ((*core)->has_work()) (*core)->step();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu_seconds = double(std::clock() - cpu0) / CLOCKS_PER_SEC;
    const EngineStats st = (*core)->stats();
    const KvCacheInfo& kv = (*core)->kv_cache_info();
    const double out_tps = double(st.n_generated_tokens) / seconds;
    const double total_tps = double(n) * (o.prompt_len + o.output_len) / seconds;
    if (o.json) {
      nlohmann::json j = {{"concurrency", n},
                          {"kv_cache_dtype", std::string(kv_cache_dtype_name(kv.dtype))},
                          {"prompt_len", o.prompt_len},
                          {"output_len", o.output_len},
                          {"seconds", seconds},
                          {"cpu_seconds", cpu_seconds},
                          {"loadavg_1m", load_average()},
                          {"output_tokens_per_s", out_tps},
                          {"total_tokens_per_s", total_tps},
                          {"steps", st.n_steps},
                          {"mean_step_ms", 1e3 * seconds / double(st.n_steps)},
                          {"preemptions", st.n_preemptions},
                          {"kv_bytes_per_token", kv.bytes_per_token()},
                          {"kv_bytes_per_sequence_window", kv.bytes_per_sequence_window()}};
      std::printf("%s\n", j.dump().c_str());
    } else {
      std::printf("N=%-4d kv %-4s %8.1f s (cpu %.1f s, load %.1f)  output %8.1f tok/s  total %9.1f tok/s  "
                  "%4llu steps (%.0f ms)  KV %.1f B/token\n",
                  n, std::string(kv_cache_dtype_name(kv.dtype)).c_str(), seconds, cpu_seconds, load_average(), out_tps,
                  total_tps, (unsigned long long)st.n_steps, 1e3 * seconds / double(st.n_steps), kv.bytes_per_token());
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace
}  // namespace deepinfer

int main(int argc, char** argv) {
  deepinfer::BenchOptions o;
  CLI::App app{"Offline throughput of the DeepInfer engine"};
  app.add_option("--model", o.model_dir, "Hugging Face model folder")->required();
  app.add_option("--concurrency", o.concurrency, "Comma-separated numbers of concurrent requests")->capture_default_str();
  app.add_option("--kv-cache-dtype", o.kv_cache_dtype, "bf16, fp8 or f32")->capture_default_str();
  app.add_option("--prompt-len", o.prompt_len, "Prompt tokens per request")->capture_default_str();
  app.add_option("--output-len", o.output_len, "Output tokens per request")->capture_default_str();
  app.add_option("--max-num-batched-tokens", o.max_num_batched_tokens, "Token budget per step")->capture_default_str();
  app.add_option("--kv-cache-memory", o.kv_cache_memory, "KV cache bytes")->capture_default_str();
  app.add_option("--threads", o.threads, "OpenMP threads (0: default)");
  app.add_flag("--json", o.json, "One JSON object per concurrency level");
  CLI11_PARSE(app, argc, argv);
  return deepinfer::run(o);
}
