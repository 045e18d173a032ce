// RouterOptions: what `deepinfer router` is told (src/cli/router_command.cpp), with defaults.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "bench/http_client.h"
#include "dist/router/affinity_key.h"
#include "dist/router/backoff.h"

namespace deepinfer::router {

struct RouterOptions {
  std::vector<std::string> prefill_urls;  // http://HOST:PORT, no trailing slash
  std::vector<std::string> decode_urls;
  std::string served_model_name;          // "" : the decode workers' own name
  std::string api_key;                    // "" : no authentication
  bench::StreamTimeouts upstream;         // connecting to a worker; waiting for its next bytes
  BackoffSchedule health;                 // check interval and back-off while a worker is down
  double health_timeout_s = 2;            // for one /health or /metrics answer
  size_t affinity_bytes = kDefaultAffinityBytes;  // prompt bytes hashed for prefill affinity
  int n_virtual_nodes = 128;              // per prefill worker on the hash ring
  size_t max_response_bytes = 64u << 20;  // a non-streamed answer larger than this is a 502
};

}  // namespace deepinfer::router
