#include "dist/router/router_service.h"

#include <ctime>

#include "dist/router/affinity_key.h"
#include "dist/router/bearer_auth.h"
#include "server/openai_request.h"
#include "server/request_json.h"

namespace deepinfer::router {
namespace {

std::vector<bench::Endpoint> endpoints_of(const RouterOptions& o) {
  std::vector<bench::Endpoint> out;
  for (const auto* urls : {&o.prefill_urls, &o.decode_urls})
    for (const auto& url : *urls) out.push_back(bench::parse_base_url(url).value());
  return out;
}

std::string endpoint_of(const std::string& path) {
  for (const char* k : {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/metrics", "/router/drain",
                        "/router/undrain"})
    if (path == k) return k;
  return "other";
}

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

}  // namespace

RouterService::RouterService(RouterOptions options)
    : options_(std::move(options)),
      registry_(options_.prefill_urls, options_.decode_urls, options_.health, options_.n_virtual_nodes),
      pool_(endpoints_of(options_)),
      monitor_(registry_, pool_, options_.health_timeout_s),
      context_{options_, registry_, pool_, metrics_, n_active_} {}

RouterService::~RouterService() { pool_.stop(); }

void RouterService::start() { monitor_.start(); }

void RouterService::set_draining() { draining_.store(true); }

void RouterService::count_rejected(const std::string& target) {
  metrics_.count(endpoint_of(target.substr(0, target.find('?'))), Outcome::kRejected);
}

void RouterService::reply_error(const std::shared_ptr<HttpResponder>& res, const std::string& endpoint, int status,
                                const std::string& message, const std::string& type, const std::string& code,
                                const std::string& param) {
  ApiError e;
  e.status = status;
  e.message = message;
  e.type = type;
  e.code = code;
  e.param = param;
  HttpHeaders headers;
  if (status == 401) headers.emplace_back("WWW-Authenticate", "Bearer realm=\"deepinfer\"");
  if (status == 503) headers.emplace_back("Retry-After", "1");
  if (endpoint != "/health" && endpoint != "/metrics")
    metrics_.count(endpoint, status == 503 ? Outcome::kNoWorker : Outcome::kRejected);
  res->send(status, "application/json", dump(e.to_json()), std::move(headers));
}

void RouterService::handle(HttpRequest req, std::shared_ptr<HttpResponder> res) {
  const std::string path = req.target.substr(0, req.target.find('?'));
  const std::string endpoint = endpoint_of(path);
  const bool get = req.method == "GET", post = req.method == "POST";

  if (draining_.load() && path != "/metrics")
    return reply_error(res, endpoint, 503, "the router is shutting down", "service_unavailable");
  if (path == "/health") {
    if (!get) return reply_error(res, endpoint, 405, "use GET for /health", "invalid_request_error");
    const bool prefill = registry_.serving(WorkerRole::kPrefill), decode = registry_.serving(WorkerRole::kDecode);
    if (prefill && decode) return res->send(200, "application/json", R"({"status":"ok"})");
    std::string missing = !prefill && !decode ? "prefill and decode" : !prefill ? "prefill" : "decode";
    return reply_error(res, endpoint, 503, "no healthy " + missing + " worker", "service_unavailable");
  }
  if (path == "/metrics") {
    if (!get) return reply_error(res, endpoint, 405, "use GET for /metrics", "invalid_request_error");
    const bool healthy = registry_.serving(WorkerRole::kPrefill) && registry_.serving(WorkerRole::kDecode);
    return res->send(200, "text/plain; version=0.0.4; charset=utf-8", metrics_.render(registry_.snapshot(), healthy));
  }
  const bool relayed = path == "/v1/completions" || path == "/v1/chat/completions";
  const bool admin = path == "/router/drain" || path == "/router/undrain";
  if (!relayed && !admin && path != "/v1/models")
    return reply_error(res, endpoint, 404, "no route for " + path, "not_found_error");
  if (((relayed || admin) && !post) || (path == "/v1/models" && !get))
    return reply_error(res, endpoint, 405, "method " + req.method + " is not allowed for " + path, "invalid_request_error");
  if (!bearer_authorized(req.header("authorization"), options_.api_key))
    return reply_error(res, endpoint, 401, "missing or invalid API key (Authorization: Bearer ...)",
                       "authentication_error", "invalid_api_key");

  if (path == "/v1/models") {
    nlohmann::json card = monitor_.model_card();
    if (card.is_null()) {
      if (options_.served_model_name.empty())
        return reply_error(res, endpoint, 503, "no decode worker has answered /v1/models yet", "service_unavailable");
      card = {{"object", "model"}, {"created", int64_t(std::time(nullptr))}, {"owned_by", "deepinfer"}};
    }
    if (!options_.served_model_name.empty()) card["id"] = options_.served_model_name;
    metrics_.count(endpoint, Outcome::kSuccess);
    return res->send(200, "application/json", dump({{"object", "list"}, {"data", nlohmann::json::array({card})}}));
  }
  if (admin) return drain(req, res, endpoint, path == "/router/drain");

  nlohmann::ordered_json body;
  if (std::string why = parse_untrusted_json(req.body, body); !why.empty())
    return reply_error(res, endpoint, 400, why, "invalid_request_error");
  if (!body.is_object()) return reply_error(res, endpoint, 400, "the request body must be a JSON object", "invalid_request_error");
  const uint64_t key = affinity_key(body, options_.affinity_bytes);
  std::make_shared<Relay>(context_, std::move(req), std::move(res), endpoint, key)->start();
}

void RouterService::drain(const HttpRequest& req, const std::shared_ptr<HttpResponder>& res, const std::string& endpoint,
                          bool draining) {
  nlohmann::ordered_json body;
  if (std::string why = parse_untrusted_json(req.body, body); !why.empty())
    return reply_error(res, endpoint, 400, why, "invalid_request_error");
  const auto url = string_member(body, "url");
  if (!url) return reply_error(res, endpoint, 400, "'url' must be a string: a worker's base URL", "invalid_request_error", "", "url");
  std::string normalized = *url;
  while (!normalized.empty() && normalized.back() == '/') normalized.pop_back();
  if (!registry_.set_draining(normalized, draining))
    return reply_error(res, endpoint, 404, "no worker has the URL '" + *url + "'", "not_found_error", "", "url");
  int64_t in_flight = 0;
  for (const auto& w : registry_.snapshot())
    if (w.url == normalized) in_flight += w.n_in_flight;
  metrics_.count(endpoint, Outcome::kSuccess);
  res->send(200, "application/json", dump({{"url", normalized}, {"draining", draining}, {"in_flight", in_flight}}));
}

}  // namespace deepinfer::router
