// What the router does with a decode worker's answer to a request it relayed, once the status
// line and headers are in (P/D contract, docs/architecture.md):
//   503 with `X-DeepInfer-Retry: prefill`, when a prefill worker was named: the decode worker
//   could not get the prompt's KV from that prefill worker and sent nothing else. Retry on
//   another healthy prefill worker (never one that failed for this request), or, when none is
//   left, answer the client 503 itself.
//   Anything else goes to the client as it is (a 503 without the header too).
#pragma once

#include <string_view>

namespace deepinfer::router {

inline constexpr std::string_view kPrefillUrlHeader = "X-DeepInfer-Prefill-Url";
inline constexpr std::string_view kRetryHeader = "x-deepinfer-retry";  // lower-cased, as responses report it

enum class UpstreamAction {
  kRelay,          // pass the response on
  kRetryPrefill,   // drop it and send the request again with another prefill worker
  kPrefillFailed,  // drop it and answer 503: no prefill worker is left to try
};

// `retry_header`: the response's X-DeepInfer-Retry value ("" if absent); `named_prefill`: the
// request carried X-DeepInfer-Prefill-Url; `another_prefill`: a prefill worker not yet tried for
// this request is healthy.
UpstreamAction upstream_action(int status, std::string_view retry_header, bool named_prefill, bool another_prefill);

}  // namespace deepinfer::router
