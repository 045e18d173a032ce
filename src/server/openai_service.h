// OpenAiService: the HTTP routes of `deepinfer serve` over one engine, tokenizer and chat
// template. JSON is parsed into native requests here (openai_request.h) and never reaches the
// engine; answers and errors use OpenAI's shapes.
//
// Routes: POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /health,
// GET /metrics, POST /tokenize, POST /detokenize. With an API key, every route but /health and
// /metrics needs "Authorization: Bearer KEY" (compared in constant time).
// States: loading (503 everywhere), ready, draining (new work 503; running requests finish).
//
// Threads: handle() runs on a network thread; /health, /metrics and bodiless requests are
// answered there, everything with a body is parsed and prepared on the request workers. An
// exception escaping a route (a defect) answers that request 500 and is logged; it never reaches
// the network threads.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "chat/chat_template.h"
#include "chat/prompt_format.h"
#include "engine/engine.h"
#include "server/grammar_cache.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/output_pump.h"
#include "server/pd_hooks.h"
#include "server/request_workers.h"
#include "server/tool_choice.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {

struct ServeOptions {
  std::string served_model_name = "default";
  std::string api_key;                 // empty: no authentication
  RequestLimits limits;                // vocab_size is filled in from the model
  int max_queued_requests = 1024;      // waiting requests beyond this get 429
  int default_max_tokens = 8192;       // chat requests without max_tokens (capped by the context); <= 0: up to the context
  int request_threads = 2;             // workers that parse, render and tokenize request bodies
  int max_pending_requests = 4096;     // bodies waiting for a worker beyond this get 503 (a burst of thousands fits)
  double request_timeout_seconds = 0;  // 0: none
  int pump_threads = 1;
  GrammarCacheOptions grammars;        // structured output: compile limits and the cache's bounds
};

class OpenAiService {
 public:
  enum class State { kLoading, kReady, kDraining };

  explicit OpenAiService(ServeOptions options);
  ~OpenAiService();

  // Called once the model is loaded; the service becomes ready.
  void attach(Engine* engine, Tokenizer tokenizer, std::optional<chat::ChatTemplate> chat_template);
  void set_draining();
  // Runs the request bodies already queued, then stops the request workers (call after the
  // HTTP server stopped, before the engine goes).
  void stop_workers();
  State state() const { return state_.load(); }
  size_t n_active() const { return pump_.n_active(); }
  void abort_all(const std::string& reason) { pump_.abort_all(reason); }
  void set_open_connections(std::function<size_t()> fn) { open_connections_ = std::move(fn); }
  // Prefill/decode disaggregation (pd_hooks.h); set before attach(), not after.
  void set_pd(PdHooks hooks) { pd_ = std::move(hooks); }

  void handle(HttpRequest request, std::shared_ptr<HttpResponder> responder);
  // Counts a request the HTTP layer refused before it reached handle() (413, 431, 400).
  void count_rejected(const std::string& target, int status);

 private:
  void route_guarded(const HttpRequest& req, const std::shared_ptr<HttpResponder>& res, const std::string& path);
  void route(const HttpRequest& req, const std::shared_ptr<HttpResponder>& res, const std::string& path);
  void completions(const HttpRequest& req, const std::shared_ptr<HttpResponder>& res);
  void chat_completions(const HttpRequest& req, const std::shared_ptr<HttpResponder>& res);
  // DeepSeek-V4 checkpoints: the prompt by DeepSeek's encoder instead of a chat template.
  void deepseek_v4_chat_completions(ChatRequest& r, const std::shared_ptr<HttpResponder>& res);
  void tokenize(const HttpRequest& req, const std::shared_ptr<HttpResponder>& res);
  void detokenize(const HttpRequest& req, const std::shared_ptr<HttpResponder>& res);
  // Encodes a rendered chat prompt, applies the default max_tokens, and starts the job.
  void start_chat(ChatRequest& r, const std::string& prompt, const ChatOutputConfig& output,
                  const std::shared_ptr<HttpResponder>& res);
  // Compiles (or finds) the request's structured-output constraint into o.sampling.constraint;
  // with `after_reasoning` it starts after the model's </think>. The 400 naming the problem.
  std::optional<ApiError> constrain(GenerationOptions& o, bool after_reasoning);
  // Submits the job's prompts to the engine and hands it to the pump; answers errors itself.
  void start(std::shared_ptr<GenerationJob> job, const std::shared_ptr<HttpResponder>& res, int priority);
  bool check_model(const std::string& model, const std::shared_ptr<HttpResponder>& res);
  void reply(const std::shared_ptr<HttpResponder>& res, int status, const nlohmann::json& body, HttpHeaders headers = {});
  void fail(const std::shared_ptr<HttpResponder>& res, const ApiError& e, HttpHeaders headers = {});

  ServeOptions options_;
  std::atomic<State> state_{State::kLoading};
  Engine* engine_ = nullptr;
  std::optional<Tokenizer> tokenizer_;
  std::optional<chat::ChatTemplate> chat_template_;
  chat::PromptFormat prompt_format_ = chat::PromptFormat::kChatTemplate;  // from the model's architecture
  bool reasoning_model_ = false;  // the vocabulary has </think>
  std::optional<GrammarCache> grammars_;  // structured output; absent when the vocabulary could not be read
  std::string grammars_error_;            // why it is absent
  ToolCallFormat tool_call_format_ = ToolCallFormat::kUnknown;
  ServerMetrics metrics_;
  OutputPump pump_;
  std::function<size_t()> open_connections_;
  PdHooks pd_;
  std::atomic<uint64_t> next_id_{0};
  RequestWorkers workers_;  // last member: joined first, while everything it uses still exists
};

}  // namespace deepinfer
