// `deepinfer router`: the OpenAI endpoint in front of prefill and decode workers (P/D
// disaggregation; src/dist/router/, docs/architecture.md). Runs until SIGINT or SIGTERM, then
// lets relayed requests finish (up to --shutdown-timeout) while new ones get 503.
#include <chrono>
#include <csignal>
#include <cstdio>
#include <set>
#include <sstream>

#include "cli/commands.h"
#include "cli/wait_while.h"
#include "dist/router/router_service.h"
#include "server/http_server.h"

namespace deepinfer::cli {
namespace {

struct RouterFlags {
  std::string prefill, decode;
  HttpServerOptions http;
  router::RouterOptions router;
  double shutdown_timeout_seconds = 30;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

// "URL[,URL...]" to normalized base URLs; an error names the flag.
Result<std::vector<std::string>> parse_urls(const std::string& flag, const std::string& list) {
  std::vector<std::string> urls;
  std::set<std::string> seen;
  std::stringstream in(list);
  std::string url;
  while (std::getline(in, url, ',')) {
    while (!url.empty() && url.back() == '/') url.pop_back();
    auto endpoint = bench::parse_base_url(url);
    if (!endpoint.ok()) return Status::Error(flag + ": " + endpoint.status().message());
    if (!endpoint->path_prefix.empty()) return Status::Error(flag + ": '" + url + "' must be http://HOST:PORT, without a path");
    if (!seen.insert(url).second) return Status::Error(flag + ": '" + url + "' is given twice");
    urls.push_back(url);
  }
  if (urls.empty()) return Status::Error(flag + " needs at least one URL");
  return urls;
}

int run_router(RouterFlags& f) {
  auto prefill = parse_urls("--prefill", f.prefill);
  if (!prefill.ok()) return fail(prefill.status().message());
  auto decode = parse_urls("--decode", f.decode);
  if (!decode.ok()) return fail(decode.status().message());
  f.router.prefill_urls = std::move(prefill).value();
  f.router.decode_urls = std::move(decode).value();
  if (f.router.upstream.connect_s <= 0 || f.router.upstream.idle_s <= 0 || f.router.health_timeout_s <= 0)
    return fail("timeouts must be positive");

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  router::RouterService service(f.router);
  f.http.on_reject = [&service](const std::string& target, int) { service.count_rejected(target); };
  auto server = HttpServer::Start(f.http, [&service](HttpRequest req, std::shared_ptr<HttpResponder> res) {
    service.handle(std::move(req), std::move(res));
  });
  if (!server.ok()) return fail(server.status().message());
  service.start();
  std::fprintf(stderr, "deepinfer: router listening on http://%s:%d (%zu prefill, %zu decode workers)\n",
               f.http.host.c_str(), (*server)->port(), f.router.prefill_urls.size(), f.router.decode_urls.size());

  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "deepinfer: %s received, draining the router (up to %.0f s)\n", sig == SIGTERM ? "SIGTERM" : "SIGINT",
               f.shutdown_timeout_seconds);
  service.set_draining();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(int64_t(f.shutdown_timeout_seconds * 1000));
  // A relay is done once its whole answer is on the client's socket, not when the worker's ends.
  const auto busy = [&] { return service.n_active() > 0 || (*server)->responses_in_progress() > 0; };
  if (wait_while(busy, deadline))
    std::fprintf(stderr, "deepinfer: closing %lld requests still relayed (%zu answers not yet sent)\n",
                 (long long)service.n_active(), (*server)->responses_in_progress());
  (*server)->stop();
  std::fprintf(stderr, "deepinfer: stopped\n");
  return 0;
}

void add_router_command(CLI::App& app, Runner& run) {
  auto f = std::make_shared<RouterFlags>();
  CLI::App* cmd = app.add_subcommand("router", "OpenAI endpoint in front of prefill and decode workers (P/D disaggregation)");
  cmd->add_option("--prefill", f->prefill, "Prefill workers: URL[,URL...], e.g. http://127.0.0.1:8001")->required();
  cmd->add_option("--decode", f->decode, "Decode workers: URL[,URL...]")->required();
  cmd->add_option("--host", f->http.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", f->http.port, "Port to listen on (0: any free port)")->capture_default_str();
  cmd->add_option("--served-model-name", f->router.served_model_name,
                  "Model name /v1/models reports (default: the decode workers'); requests are relayed unchanged, so "
                  "workers must accept it");
  cmd->add_option("--api-key", f->router.api_key, "Require 'Authorization: Bearer KEY' (also for /router/drain)");
  cmd->add_option("--http-threads", f->http.n_threads, "Network threads")->capture_default_str();
  cmd->add_option("--max-body-bytes", f->http.max_body_bytes, "Larger request bodies get 413")->capture_default_str();
  cmd->add_option("--max-header-bytes", f->http.max_header_bytes, "Larger request headers get 431")->capture_default_str();
  cmd->add_option("--read-timeout", f->http.read_timeout_seconds, "Seconds for a request to arrive")->capture_default_str();
  cmd->add_option("--upstream-connect-timeout", f->router.upstream.connect_s, "Seconds to connect to a worker")
      ->capture_default_str();
  cmd->add_option("--upstream-read-timeout", f->router.upstream.idle_s,
                  "Seconds a worker may stay silent (before its answer starts, or between stream chunks)")
      ->capture_default_str();
  cmd->add_option("--max-response-bytes", f->router.max_response_bytes,
                  "Largest non-streamed answer relayed (larger: 502)")
      ->capture_default_str();
  cmd->add_option("--health-interval", f->router.health.interval_s, "Seconds between checks of a healthy worker")
      ->capture_default_str();
  cmd->add_option("--health-timeout", f->router.health_timeout_s, "Seconds for a worker's /health or /metrics answer")
      ->capture_default_str();
  cmd->add_option("--health-max-backoff", f->router.health.max_s,
                  "Longest wait between checks of a worker that is down (the wait doubles from 0.25 s)")
      ->capture_default_str();
  cmd->add_option("--shutdown-timeout", f->shutdown_timeout_seconds,
                  "Seconds relayed requests may take to finish after SIGTERM (new ones get 503)")
      ->capture_default_str();
  cmd->add_option("--affinity-prefix-bytes", f->router.affinity_bytes,
                  "Leading prompt bytes hashed to choose the prefill worker (prefix-cache affinity)")
      ->capture_default_str();
  cmd->callback([&run, f] { run = [f] { return run_router(*f); }; });
}

const bool kRegistered = register_command(&add_router_command);

}  // namespace
}  // namespace deepinfer::cli
