// The worker-side settings of prefill/decode disaggregation (deepinfer serve --role ...).
#pragma once

namespace deepinfer::pd {

struct PdOptions {
  // Decode: prompts of fewer tokens are computed here even when a prefill worker is named.
  int min_prefill_tokens = 256;
  // Decode: the whole remote prefill (control messages, computing, moving the blocks) must end
  // within this, else the request fails with 503 and X-DeepInfer-Retry: prefill.
  double timeout_seconds = 30;
  // Prefill: how long granted blocks stay pinned for the decode worker to read them.
  double lease_seconds = 30;
};

}  // namespace deepinfer::pd
