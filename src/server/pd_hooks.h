// PdHooks: what prefill/decode disaggregation (dist/pd) adds to OpenAiService, as callbacks so
// that the server library does not depend on the transport. Empty hooks: today's server.
//
// - route: the internal control routes (POST /internal/pd/v1/...) of a prefill worker; called on
//   a request worker, it answers the request itself.
// - fetch_prefix: on a decode worker, for a request carrying X-DeepInfer-Prefill-Url, the KV of
//   a prompt's leading blocks from that prefill worker, received into this engine's cache and
//   pinned for Engine::submit_pinned (no pins: the prompt is computed here, e.g. when shorter
//   than the threshold). An error means the remote prefill failed and nothing is held: the
//   service answers 503 with X-DeepInfer-Retry: prefill. Blocks the request worker for a bounded
//   time; `cancelled` turns true when the client goes away.
// - metrics: Prometheus text appended to /metrics.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/prefix_transfer.h"
#include "server/http_server.h"

namespace deepinfer {

inline constexpr const char* kPrefillUrlHeader = "x-deepinfer-prefill-url";  // lower-cased, as HttpRequest keeps it

struct PdHooks {
  std::function<void(const HttpRequest& request, const std::shared_ptr<HttpResponder>& res, const std::string& path)> route;
  std::function<Result<std::vector<PinnedBlock>>(const std::string& prefill_url, const std::vector<int32_t>& prompt,
                                                 const std::function<bool()>& cancelled)>
      fetch_prefix;
  std::function<std::string()> metrics;
};

}  // namespace deepinfer
