// The OpenAI-compatible streaming protocol, client side: the request body for /v1/completions or
// /v1/chat/completions with `stream: true` and usage, and StreamReader, which turns the streamed
// SSE body into a RequestRecord's timings and counts.
#pragma once

#include "bench/request_record.h"
#include "bench/sse_parser.h"
#include "bench/workload.h"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace deepinfer::bench {

struct ApiOptions {
  std::string model;
  bool chat = false;        // /v1/chat/completions (messages) rather than /v1/completions (prompt)
  bool ignore_eos = true;   // ask the server to generate exactly max_tokens (vLLM, llama.cpp, ...)
  double temperature = 0;
  nlohmann::json extra_body = nlohmann::json::object();  // merged into every request body last

  const char* path() const { return chat ? "/v1/chat/completions" : "/v1/completions"; }
};

std::string make_request_body(const TurnRequest& request, const ApiOptions& api);

// Reads one streamed response. Not thread-safe; one per request.
class StreamReader {
 public:
  // Body bytes that arrived at t_s (seconds since the request was sent).
  void on_body(std::string_view bytes, double t_s);
  // Completes `record` (whose transport error, if any, is already set) once the body ended.
  void finish(RequestRecord& record, int64_t n_tokens_in_intended);

 private:
  void on_event(const std::string& data, double t_s);

  SseParser sse_;
  std::vector<std::string> events_;
  std::vector<double> chunk_times_s_;
  int64_t n_prompt_tokens_ = -1;      // from usage, -1 until reported
  int64_t n_completion_tokens_ = -1;  // from usage, -1 until reported
  bool done_ = false;                 // saw [DONE]
  std::string error_;                 // stream_error or bad_stream
  std::string error_detail_;
};

}  // namespace deepinfer::bench
