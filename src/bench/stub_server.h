// The stub server: an OpenAI-compatible streaming server with exactly known timings and no
// model, to test the benchmark (and to compare it with other benchmark tools) against numbers
// that are known in advance. A test tool, not a product: `deepinfer bench stub-server`.
//
// Per generation request (/v1/completions, /v1/chat/completions; streamed or not):
//   prompt tokens   WordText::split_tokens of the prompt (chat: the messages' contents joined),
//                   exact for the benchmark's own prompts
//   output tokens   max_tokens (or max_completion_tokens), else default_max_tokens
//   timings         from the moment the request is read: the first token after
//                   ttft_ms + prefill_ms_per_token * (prompt tokens not in the prefix cache),
//                   then one token per itl_ms, where every stall_every-th gap is stall_ms longer
// Chat streams open with a role-only chunk at once (as vLLM does), which carries no output.
// With stream_options.include_usage a usage chunk follows the last token; then data: [DONE].
// Every fail_every-th generation request is answered with HTTP 500.
// GET /metrics (Prometheus text, with DeepInfer's server's names): deepinfer_kv_cache_usage_ratio
//   (generations in flight / kv_slots), deepinfer_prompt_tokens_total and
//   deepinfer_cached_prompt_tokens_total (prompt tokens looked up and found in the prefix cache,
//   which keeps every full block of block_tokens prompt tokens it has seen, keyed by the chain of
//   blocks before it; a prompt hits on its leading run of known blocks), deepinfer_requests_total.
//   GET /v1/models and /health answer too.
#pragma once

#include "core/status.h"

#include <cstdint>
#include <string>

namespace deepinfer::bench {

struct StubOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port
  std::string model = "stub";
  double ttft_ms = 50;
  double prefill_ms_per_token = 0;
  double itl_ms = 20;
  int64_t stall_every = 0;  // 0: no stalls
  double stall_ms = 0;
  int64_t default_max_tokens = 16;
  int64_t fail_every = 0;  // 0: never fail
  int64_t kv_slots = 64;
  int64_t block_tokens = 16;
  int n_threads = 1;
  double lifetime_s = 3600;  // exits by itself after this long
};

// Serves until lifetime_s has passed or SIGINT/SIGTERM arrives. Once listening, prints
// "listening on http://HOST:PORT" and a newline to stdout.
Status run_stub_server(const StubOptions& options);

}  // namespace deepinfer::bench
