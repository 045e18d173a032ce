// RequestRecord: what the benchmark measured for one request, from its streamed response.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deepinfer::bench {

struct RequestRecord {
  int64_t conversation = 0;  // index in the workload
  int64_t turn = 0;          // 0 for the first (or only) turn
  double t_sent_s = 0;       // when the request was sent, seconds since the run started
  double e2e_s = 0;          // sent -> response complete
  // Arrival of each chunk that carried output text (sent -> chunk), ascending. The first is the
  // time to first token; the gaps between neighbours are the inter-token latencies (a chunk
  // carrying several tokens counts as one gap, as a user sees it).
  std::vector<double> chunk_times_s;
  int64_t n_tokens_in = 0;   // usage.prompt_tokens, else the workload's intended length
  int64_t n_tokens_out = 0;  // usage.completion_tokens, else the number of output chunks
  bool usage_reported = false;
  // Empty when the request succeeded; else its kind: connect, timeout, http_<status>, transport
  // (the connection failed mid-exchange), stream_error (the server sent an error event),
  // bad_stream (not SSE/JSON as expected), incomplete (no [DONE]), no_output (no output text).
  std::string error;
  std::string error_detail;  // the server's message or the transport error, for the log

  bool ok() const { return error.empty(); }
  double ttft_s() const { return chunk_times_s.empty() ? 0.0 : chunk_times_s.front(); }
};

}  // namespace deepinfer::bench
