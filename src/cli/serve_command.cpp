// `deepinfer serve`: the OpenAI-compatible HTTP server. It listens at once (GET /health answers
// 503 while the model loads), loads the model, tokenizer and chat template, then serves until
// SIGINT/SIGTERM: new requests get 503 (connections are still accepted, so clients and load
// balancers see why), running requests may finish for up to --shutdown-timeout seconds, the
// rest are aborted, and it exits 0.
//
// A checkpoint whose tokenizer_config.json or chat template is broken does not start (the error
// names the file); one without any chat template serves completions only and says so at every
// chat request. DEEPINFER_LOAD_DELAY_MS (tests) holds the load back that long after listening.
//
// Expert parallelism (`mpirun -np N deepinfer serve --expert-parallel N`): every rank serves its
// own requests on its own port, rank r on --port + r (any free port each with --port 0), with its
// own engine and KV cache, the routed experts spread over all ranks. `deepinfer router` in front,
// with the ranks as decode workers, places requests on them by load. If the group fails (a rank stops answering within --ep-timeout
// or dies), every rank still up fails its running requests, and /health and new requests get 503.
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "cli/wait_while.h"
#include "chat/prompt_format.h"
#include "dist/ep/ep_metrics.h"
#include "dist/ep/ep_runtime.h"
#include "dist/pd/pd_role.h"
#include "core/mapped_file.h"
#include "model/loader.h"
#include "server/http_server.h"
#include "server/openai_service.h"

namespace deepinfer::cli {
namespace {

struct ServeFlags {
  std::string model_dir;
  HttpServerOptions http;
  ServeOptions serve;
  EngineFlags engine;
  double shutdown_timeout_seconds = 30;
  std::string role = "both";  // prefill/decode disaggregation (dist/pd)
  pd::PdOptions pd;
};

int fail(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

// Whether the folder declares a chat template at all: a template file, or a tokenizer_config.json
// that is not a JSON object with a null or absent chat_template. Only a folder that declares none
// may start without chat.
bool declares_chat_template(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const fs::path dir(model_dir);
  std::error_code ec;
  if (fs::exists(dir / "chat_template.jinja", ec) || fs::is_directory(dir / "additional_chat_templates", ec)) return true;
  if (!fs::exists(dir / "tokenizer_config.json", ec)) return false;
  auto text = read_text_file((dir / "tokenizer_config.json").string());
  if (!text.ok()) return true;
  const auto config = nlohmann::json::parse(text.value(), nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return true;  // broken: let the loader's error say why
  auto it = config.find("chat_template");
  return it != config.end() && !it->is_null();
}

int run_serve(ServeFlags& f) {
  if (Status s = f.engine.resolve(); !s.ok()) return fail(s.message());
  const std::optional<pd::PdRole> role = pd::parse_pd_role(f.role);
  if (!role) return fail("--role: '" + f.role + "' is not prefill, decode or both");
  // Signals go to the main thread's sigwait only: block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  auto ep = EpRuntime::start(f.engine.expert_parallel, f.engine.ep_timeout_seconds);
  if (!ep.ok()) return fail(ep.status().message());
  if (*ep) {
    if (*role != pd::PdRole::kBoth) return fail("--role " + f.role + " does not run with --expert-parallel");
    f.engine.model.expert_group = &(*ep)->group();
    f.engine.model.expert_load = &(*ep)->load();
    if (f.http.port != 0) f.http.port += (*ep)->rank();
  }
  // Every open connection is a file descriptor: allow as many as the hard limit does.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }

  OpenAiService service(f.serve);
  f.http.on_reject = [&service](const std::string& target, int status) { service.count_rejected(target, status); };
  auto server = HttpServer::Start(f.http, [&service](HttpRequest req, std::shared_ptr<HttpResponder> res) {
    service.handle(std::move(req), std::move(res));
  });
  if (!server.ok()) return fail(server.status().message());
  service.set_open_connections([s = server.value().get()] { return s->open_connections(); });
  std::fprintf(stderr, "deepinfer: listening on http://%s:%d (loading %s)\n", f.http.host.c_str(), (*server)->port(),
               f.model_dir.c_str());
  if (*ep)
    std::fprintf(stderr, "deepinfer: rank %d of %d (pid %d) serves http://%s:%d\n", (*ep)->rank(), (*ep)->size(),
                 int(getpid()), f.http.host.c_str(), (*server)->port());

  if (const char* delay = std::getenv("DEEPINFER_LOAD_DELAY_MS"))
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(delay)));
  auto model = load_causal_lm(f.model_dir, f.engine.model);
  if (!model.ok()) return fail(model.status().message());
  std::fprintf(stderr, "deepinfer: %s\n", describe_causal_lm(**model, f.engine.options.block_size).c_str());
  auto tokenizer = Tokenizer::Load(f.model_dir);
  if (!tokenizer.ok()) return fail(tokenizer.status().message());
  std::optional<chat::ChatTemplate> chat_template;
  if (chat::prompt_format_for_architecture((*model)->info().architecture) == chat::PromptFormat::kDeepseekV4) {
    std::fprintf(stderr, "deepinfer: chat prompts rendered by DeepSeek-V4's encoder\n");
  } else {
    auto tmpl = chat::ChatTemplate::Load(f.model_dir);
    if (tmpl.ok()) chat_template = std::move(tmpl).value();
    else if (declares_chat_template(f.model_dir)) return fail(tmpl.status().message());
    else std::fprintf(stderr, "deepinfer: no chat template, /v1/chat/completions disabled: %s\n", tmpl.status().message().c_str());
  }
  auto engine = Engine::create(std::move(model).value(), f.engine.options, *ep ? &(*ep)->group() : nullptr);
  if (!engine.ok()) return fail(engine.status().message());
  auto pd_runtime = pd::PdRuntime::start(*role, **engine, f.engine.options.enable_prefix_caching, service, f.pd);
  if (!pd_runtime.ok()) return fail(pd_runtime.status().message());
  if (*role != pd::PdRole::kBoth) std::fprintf(stderr, "deepinfer: role %s\n", f.role.c_str());
  if (*ep) {  // the expert loads and exchange costs in /metrics
    PdHooks hooks;
    hooks.metrics = [rt = ep->get()] { return ep_metrics_text(rt->load().snapshot(), rt->group().stats()); };
    service.set_pd(std::move(hooks));
  }
  service.attach(engine.value().get(), std::move(tokenizer).value(), std::move(chat_template));
  std::fprintf(stderr, "deepinfer: ready, serving '%s'\n", f.serve.served_model_name.c_str());

  int sig = 0;
  if (*ep) {  // also watch the group: once it fails, this rank answers 503
    bool healthy = true;
    const timespec poll{0, 100'000'000};
    while ((sig = sigtimedwait(&signals, nullptr, &poll)) < 0) {
      if (!healthy) continue;
      if (Status s = (*engine)->health(); !s.ok()) {
        healthy = false;
        std::fprintf(stderr, "deepinfer: unhealthy, /health and new requests get 503: %s\n", s.message().c_str());
        service.set_draining();
      }
    }
  } else {
    sigwait(&signals, &sig);
  }
  std::fprintf(stderr, "deepinfer: %s received, draining (up to %.0f s)\n", sig == SIGTERM ? "SIGTERM" : "SIGINT",
               f.shutdown_timeout_seconds);
  service.set_draining();
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(int64_t(f.shutdown_timeout_seconds * 1000));
  // A request is done once its whole answer is on the socket, not when its generation ends: the
  // last chunks of a stream may still be queued for a client that reads slowly.
  const auto busy = [&] { return service.n_active() > 0 || (*server)->responses_in_progress() > 0; };
  if (wait_while(busy, deadline)) {
    std::fprintf(stderr, "deepinfer: aborting %zu requests still running (%zu answers not yet sent)\n", service.n_active(),
                 (*server)->responses_in_progress());
    service.abort_all("the server is shutting down");
    wait_while(busy, std::chrono::steady_clock::now() + std::chrono::seconds(2));
  }
  (*server)->stop();
  service.stop_workers();
  pd_runtime->reset();  // releases its pins on the engine, which must still exist
  engine->reset();  // an expert-parallel engine returns once every rank's has stopped (or the group failed)
  if (*ep) std::fprintf(stderr, "deepinfer: %s\n", (*ep)->summary().c_str());
  std::fprintf(stderr, "deepinfer: stopped\n");
  return 0;
}

void add_serve_command(CLI::App& app, Runner& run) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve a model through an OpenAI-compatible HTTP API");
  cmd->add_option("--model", f->model_dir, "Hugging Face model folder")->required();
  cmd->add_option("--host", f->http.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", f->http.port, "Port to listen on (0: any free port)")->capture_default_str();
  cmd->add_option("--served-model-name", f->serve.served_model_name, "Model name clients use")->capture_default_str();
  cmd->add_option("--api-key", f->serve.api_key, "Require 'Authorization: Bearer KEY'");
  cmd->add_option("--http-threads", f->http.n_threads, "Network threads")->capture_default_str();
  cmd->add_option("--max-body-bytes", f->http.max_body_bytes, "Larger request bodies get 413")->capture_default_str();
  cmd->add_option("--max-header-bytes", f->http.max_header_bytes, "Larger request headers get 431")
      ->capture_default_str();
  cmd->add_option("--read-timeout", f->http.read_timeout_seconds, "Seconds for a request to arrive")
      ->capture_default_str();
  cmd->add_option("--max-queued-requests", f->serve.max_queued_requests, "Waiting requests beyond this get 429")
      ->capture_default_str();
  cmd->add_option("--default-max-tokens", f->serve.default_max_tokens,
                  "Chat requests without max_tokens generate at most this many (capped by the context; 0: up to the context)")
      ->capture_default_str();
  cmd->add_option("--request-threads", f->serve.request_threads,
                  "Threads that parse, render and tokenize request bodies (off the network threads)")
      ->capture_default_str();
  cmd->add_option("--request-timeout", f->serve.request_timeout_seconds, "Seconds a request may run (0: no limit)")
      ->capture_default_str();
  cmd->add_option("--shutdown-timeout", f->shutdown_timeout_seconds,
                  "Seconds running requests may take to finish after SIGTERM")
      ->capture_default_str();
  cmd->add_option("--max-n", f->serve.limits.max_n, "Largest 'n'")->capture_default_str();
  cmd->add_option("--max-stop-strings", f->serve.limits.max_stop_strings, "Most 'stop' strings")->capture_default_str();
  cmd->add_option("--max-prompts", f->serve.limits.max_prompts, "Most prompts in one completions request")
      ->capture_default_str();
  cmd->add_option("--role", f->role,
                  "both: a whole server; prefill/decode: one side of prefill/decode disaggregation behind "
                  "`deepinfer router` (decode workers have prompts computed by the prefill worker named in "
                  "X-DeepInfer-Prefill-Url, the KV moved by UCX)")
      ->capture_default_str();
  cmd->add_option("--pd-min-prefill-tokens", f->pd.min_prefill_tokens,
                  "Decode: prompts shorter than this are computed here, skipping the prefill worker")
      ->capture_default_str();
  cmd->add_option("--pd-timeout", f->pd.timeout_seconds,
                  "Decode: seconds a remote prefill may take (else 503 with X-DeepInfer-Retry: prefill)")
      ->capture_default_str();
  cmd->add_option("--pd-lease", f->pd.lease_seconds,
                  "Prefill: seconds computed blocks stay pinned for the decode worker to read")
      ->capture_default_str();
  f->engine.add_to(*cmd);
  cmd->callback([&run, f] { run = [f] { return run_serve(*f); }; });
}

const bool kRegistered = register_command(&add_serve_command);

}  // namespace
}  // namespace deepinfer::cli
