#include "dist/pd/pd_role.h"

namespace deepinfer::pd {

std::optional<PdRole> parse_pd_role(std::string_view name) {
  if (name == "both") return PdRole::kBoth;
  if (name == "prefill") return PdRole::kPrefill;
  if (name == "decode") return PdRole::kDecode;
  return std::nullopt;
}

Result<std::unique_ptr<PdRuntime>> PdRuntime::start(PdRole role, Engine& engine, bool prefix_caching,
                                                    OpenAiService& service, const PdOptions& options) {
  if (role == PdRole::kBoth) return std::unique_ptr<PdRuntime>();
  if (!prefix_caching)
    return Status::Error("--role prefill and --role decode hand blocks over through the prefix cache: drop --no-prefix-caching");
  if (options.timeout_seconds <= 0 || options.lease_seconds <= 0 || options.lease_seconds * 1000 > kMaxLeaseMs)
    return Status::Error("--pd-timeout and --pd-lease must be positive (the lease at most " +
                         std::to_string(kMaxLeaseMs / 1000) + " s)");
  auto agent = KvTransferAgent::create(engine.kv_cache_view());
  if (!agent.ok()) return agent.status();
  std::unique_ptr<PdRuntime> rt(new PdRuntime());
  rt->agent_ = std::move(agent).value();
  PdHooks hooks;
  if (role == PdRole::kPrefill) {
    rt->prefill_ = std::make_unique<PrefillWorker>(engine, *rt->agent_, options);
    PrefillWorker* w = rt->prefill_.get();
    hooks.route = [w](const HttpRequest& req, const std::shared_ptr<HttpResponder>& res, const std::string& path) {
      w->handle(req, res, path);
    };
    hooks.metrics = [w] { return w->metrics(); };
  } else {
    rt->decode_ = std::make_unique<DecodeWorker>(engine, *rt->agent_, options);
    DecodeWorker* w = rt->decode_.get();
    hooks.fetch_prefix = [w](const std::string& url, const std::vector<int32_t>& prompt, const std::function<bool()>& cancelled) {
      return w->fetch_prefix(url, prompt, cancelled);
    };
    hooks.metrics = [w] { return w->metrics(); };
  }
  service.set_pd(std::move(hooks));
  return rt;
}

PdRuntime::~PdRuntime() = default;  // workers first (they release their pins), then the agent

}  // namespace deepinfer::pd
