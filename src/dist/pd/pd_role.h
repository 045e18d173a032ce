// PdRole: what `deepinfer serve --role` makes of a server. both (the default): today's server,
// no transfer machinery. prefill: a KvTransferAgent over the engine's cache and a PrefillWorker
// answering /internal/pd/v1/*. decode: an agent and a DecodeWorker that has requests carrying
// X-DeepInfer-Prefill-Url prefilled there. Either way the OpenAI routes, /health and /metrics
// stay as they are (/metrics gains the deepinfer_pd_* series).
#pragma once

#include <memory>
#include <optional>
#include <string_view>

#include "core/status.h"
#include "dist/pd/decode_worker.h"
#include "dist/pd/kv_transfer_agent.h"
#include "dist/pd/pd_options.h"
#include "dist/pd/prefill_worker.h"
#include "engine/engine.h"
#include "server/openai_service.h"

namespace deepinfer::pd {

enum class PdRole { kBoth, kPrefill, kDecode };
std::optional<PdRole> parse_pd_role(std::string_view name);

// The agent and worker of a prefill or decode server, hooked into `service`. Destroy it after the
// HTTP server and the service's request workers stopped, and before the engine.
class PdRuntime {
 public:
  // nullptr for kBoth. An error when the role needs what the engine lacks (the prefix cache) or
  // UCX cannot start.
  static Result<std::unique_ptr<PdRuntime>> start(PdRole role, Engine& engine, bool prefix_caching, OpenAiService& service,
                                                  const PdOptions& options);
  ~PdRuntime();

 private:
  PdRuntime() = default;
  std::unique_ptr<KvTransferAgent> agent_;
  std::unique_ptr<PrefillWorker> prefill_;
  std::unique_ptr<DecodeWorker> decode_;
};

}  // namespace deepinfer::pd
