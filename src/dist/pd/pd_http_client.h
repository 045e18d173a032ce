// pd_post: one bounded HTTP/1.1 POST of a control message to a peer worker (a fresh connection
// each time; control messages are few per request). It returns at the deadline at the latest,
// or within ~50 ms of `cancelled()` turning true, whatever the peer does.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace deepinfer::pd {

// A worker's base URL: http://HOST:PORT (no path, no TLS). The router passes it in
// X-DeepInfer-Prefill-Url; anything else is an error naming the problem.
struct PeerUrl {
  std::string host;
  std::string port;
};
Result<PeerUrl> parse_peer_url(std::string_view url);

struct PdReply {
  int status = 0;
  std::string body;
};

Result<PdReply> pd_post(const PeerUrl& peer, const std::string& path, std::string body,
                        std::chrono::steady_clock::time_point deadline, const std::function<bool()>& cancelled = {});

}  // namespace deepinfer::pd
