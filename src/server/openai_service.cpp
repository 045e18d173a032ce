#include "server/openai_service.h"

#include <cctype>
#include <cstdio>
#include <ctime>
#include <string_view>

#include "chat/reasoning_parser.h"
#include "server/deepseek_v4_chat.h"
#include "server/request_json.h"
#include "server/tool_call_grammar.h"

namespace deepinfer {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

ApiError api_error(int status, std::string message, std::string type = "invalid_request_error",
                   std::string param = "", std::string code = "") {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

// Compares in time that depends only on the lengths, not on where the strings differ.
bool constant_time_equal(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? a[i] : 0, y = i < b.size() ? b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

// Records each response's status in the metrics, by endpoint.
class CountingResponder final : public HttpResponder {
 public:
  CountingResponder(std::shared_ptr<HttpResponder> inner, ServerMetrics& m, std::string endpoint, std::string prefill_url)
      : inner_(std::move(inner)), metrics_(m), endpoint_(std::move(endpoint)), prefill_url_(std::move(prefill_url)) {}
  // The request's X-DeepInfer-Prefill-Url ("" without one): where the router has its prompt computed.
  const std::string& prefill_url() const { return prefill_url_; }
  void send(int status, const std::string& type, std::string body, HttpHeaders h) override {
    answered_.store(true);
    metrics_.count_request(endpoint_, status);
    inner_->send(status, type, std::move(body), std::move(h));
  }
  void begin_stream(int status, const std::string& type, HttpHeaders h) override {
    answered_.store(true);
    metrics_.count_request(endpoint_, status);
    inner_->begin_stream(status, type, std::move(h));
  }
  bool answered() const { return answered_.load(); }
  void write(std::string chunk) override { inner_->write(std::move(chunk)); }
  void end() override { inner_->end(); }
  bool disconnected() const override { return inner_->disconnected(); }
  void on_disconnect(std::function<void()> cb) override { inner_->on_disconnect(std::move(cb)); }

 private:
  std::shared_ptr<HttpResponder> inner_;
  ServerMetrics& metrics_;
  std::string endpoint_;
  std::string prefill_url_;
  std::atomic<bool> answered_{false};
};

// The endpoint label of a request target ("other" for unknown paths).
std::string endpoint_of(const std::string& path) {
  static const char* kKnown[] = {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health",
                                 "/metrics", "/tokenize", "/detokenize"};
  for (const char* k : kKnown)
    if (path == k) return k;
  return "other";
}

// True for an ASCII case-insensitive match of a and b.
bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

// The credentials of "Authorization: Bearer TOKEN"; the scheme is case-insensitive (RFC 7235)
// and may be followed by several spaces. Empty for another scheme or none.
std::string bearer_token(const std::string& authorization) {
  const size_t space = authorization.find(' ');
  if (space == std::string::npos || !iequals(std::string_view(authorization).substr(0, space), "bearer")) return "";
  const size_t start = authorization.find_first_not_of(' ', space);
  return start == std::string::npos ? "" : authorization.substr(start);
}

// Template variables the server sets itself: a request may not override them through
// chat_template_kwargs (the special tokens would let it forge what the model takes as markup).
bool reserved_template_variable(const std::string& name) {
  static const char* kReserved[] = {"messages",  "tools",     "documents", "add_generation_prompt", "chat_template",
                                    "bos_token", "eos_token", "unk_token", "sep_token",             "pad_token",
                                    "cls_token", "mask_token", "additional_special_tokens"};
  for (const char* r : kReserved)
    if (name == r) return true;
  return false;
}

std::string random_suffix(uint64_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(n * 0x9e3779b97f4a7c15ull ^ uint64_t(std::time(nullptr))));
  return buf;
}

}  // namespace

OpenAiService::OpenAiService(ServeOptions options)
    : options_(std::move(options)), pump_(options_.pump_threads), workers_(options_.request_threads, options_.max_pending_requests) {}

OpenAiService::~OpenAiService() = default;

void OpenAiService::attach(Engine* engine, Tokenizer tokenizer, std::optional<chat::ChatTemplate> chat_template) {
  engine_ = engine;
  options_.limits.vocab_size = engine->model_info().vocab_size;
  reasoning_model_ = tokenizer.token_to_id("</think>").has_value();
  if (auto vocabulary = grammar::TokenVocabulary::FromTokenizer(tokenizer); vocabulary.ok())
    grammars_.emplace(std::make_shared<const grammar::TokenVocabulary>(std::move(vocabulary).value()), options_.grammars);
  else
    grammars_error_ = vocabulary.status().message();
  tokenizer_ = std::move(tokenizer);
  chat_template_ = std::move(chat_template);
  prompt_format_ = chat::prompt_format_for_architecture(engine->model_info().architecture);
  if (chat_template_) tool_call_format_ = detect_tool_call_format(*chat_template_);
  if (grammars_) {  // the frames of response_format's JSON and of strict tool arguments
    const ToolCallFormat tools = prompt_format_ == chat::PromptFormat::kDeepseekV4 ? ToolCallFormat::kDeepseekV4
                                                                                   : tool_call_format_;
    std::vector<grammar::JsonSchemaOptions> warm = {options_.grammars.json_schema};
    if (tools != ToolCallFormat::kUnknown) warm.push_back(tool_call_json_options(tools, options_.grammars.json_schema));
    grammars_->warm_frames(std::move(warm));
  }
  state_.store(State::kReady);
}

void OpenAiService::set_draining() { state_.store(State::kDraining); }

void OpenAiService::stop_workers() { workers_.stop(); }

void OpenAiService::reply(const std::shared_ptr<HttpResponder>& res, int status, const json& body, HttpHeaders headers) {
  res->send(status, "application/json", dump(body), std::move(headers));
}

void OpenAiService::fail(const std::shared_ptr<HttpResponder>& res, const ApiError& e, HttpHeaders headers) {
  reply(res, e.status, e.to_json(), std::move(headers));
}

void OpenAiService::handle(HttpRequest request, std::shared_ptr<HttpResponder> responder) {
  std::string path = request.target.substr(0, request.target.find('?'));
  auto res = std::make_shared<CountingResponder>(std::move(responder), metrics_, endpoint_of(path),
                                                 request.header(kPrefillUrlHeader));
  // Bodies are parsed, rendered and tokenized on the request workers, so that a large one never
  // delays the network threads (and /health, /metrics with them).
  if (request.method == "POST" && !request.body.empty()) {
    auto task = [this, req = std::move(request), res, path]() { route_guarded(req, res, path); };
    if (!workers_.try_post(std::move(task)))
      fail(res, api_error(503, "the server is busy (" + std::to_string(options_.max_pending_requests) +
                                   " requests are being read); retry later",
                          "service_unavailable", "", "server_busy"),
           {{"Retry-After", "1"}});
    return;
  }
  route_guarded(request, res, path);
}

void OpenAiService::count_rejected(const std::string& target, int status) {
  metrics_.count_request(endpoint_of(target.substr(0, target.find('?'))), status);
}

void OpenAiService::route_guarded(const HttpRequest& req, const std::shared_ptr<HttpResponder>& res,
                                  const std::string& path) {
  // The last line of defence: a mistake in request handling costs this request, never the process.
  try {
    route(req, res, path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "deepinfer: internal error handling %s %s: %s\n", req.method.c_str(), path.c_str(), e.what());
    if (!static_cast<const CountingResponder&>(*res).answered())
      fail(res, api_error(500, "internal error while handling the request", "internal_server_error"));
  }
}

void OpenAiService::route(const HttpRequest& req, const std::shared_ptr<HttpResponder>& res, const std::string& path) {
  const bool get = req.method == "GET", post = req.method == "POST";
  if (path == "/health") {
    if (!get) return fail(res, api_error(405, "use GET for /health"));
    if (state_.load() == State::kReady) return reply(res, 200, {{"status", "ok"}});
    return fail(res, api_error(503, state_.load() == State::kLoading ? "the model is loading" : "the server is shutting down",
                               "service_unavailable"));
  }
  if (path == "/metrics") {
    if (!get) return fail(res, api_error(405, "use GET for /metrics"));
    ServerMetrics::EngineGauges g;
    if (state_.load() != State::kLoading) {
      const EngineStats s = engine_->stats();
      g.n_waiting = size_t(s.n_waiting);
      g.n_running = size_t(s.n_running);
      g.kv_usage = s.kv_usage;
      g.prefix_cache_queries = s.n_prefix_query_tokens;
      g.prefix_cache_hits = s.n_prefix_hit_tokens;
      g.spec_draft_tokens = s.n_draft_tokens;
      g.spec_accepted_tokens = s.n_accepted_draft_tokens;
      g.spec_drafts_at.assign(s.n_drafts_at.begin(), s.n_drafts_at.end());
      g.spec_accepted_at.assign(s.n_accepted_at.begin(), s.n_accepted_at.end());
    }
    if (open_connections_) g.open_connections = open_connections_();
    std::string text = metrics_.render(g);
    if (state_.load() != State::kLoading && pd_.metrics) text += pd_.metrics();
    return res->send(200, "text/plain; version=0.0.4; charset=utf-8", std::move(text));
  }
  if (path.starts_with("/internal/pd/") && state_.load() == State::kReady && pd_.route) return pd_.route(req, res, path);
  static const char* kPost[] = {"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"};
  bool known_post = false;
  for (const char* k : kPost) known_post |= path == k;
  if (!known_post && path != "/v1/models") return fail(res, api_error(404, "no route for " + path, "not_found_error"));
  if ((known_post && !post) || (path == "/v1/models" && !get))
    return fail(res, api_error(405, "method " + req.method + " is not allowed for " + path));

  if (!options_.api_key.empty()) {
    if (!constant_time_equal(bearer_token(req.header("authorization")), options_.api_key))
      return fail(res, api_error(401, "missing or invalid API key (Authorization: Bearer ...)", "authentication_error",
                                 "", "invalid_api_key"),
                  {{"WWW-Authenticate", "Bearer realm=\"deepinfer\""}});
  }
  if (state_.load() != State::kReady)
    return fail(res, api_error(503, state_.load() == State::kLoading ? "the model is loading" : "the server is shutting down",
                               "service_unavailable"));

  if (path == "/v1/models") {
    return reply(res, 200,
                 {{"object", "list"},
                  {"data", json::array({{{"id", options_.served_model_name},
                                         {"object", "model"},
                                         {"created", int64_t(std::time(nullptr))},
                                         {"owned_by", "deepinfer"},
                                         {"max_model_len", engine_->max_model_len()}}})}});
  }
  if (path == "/v1/completions") return completions(req, res);
  if (path == "/v1/chat/completions") return chat_completions(req, res);
  if (path == "/tokenize") return tokenize(req, res);
  return detokenize(req, res);
}

namespace {

// The body as JSON, or the 400 to send: nesting is bounded (request_json.h) and nlohmann's
// parser rejects invalid UTF-8 in strings.
std::optional<ApiError> parse_body(const HttpRequest& req, ojson& out) {
  if (std::string why = parse_untrusted_json(req.body, out); !why.empty()) return api_error(400, why);
  if (!out.is_object()) return api_error(400, "the request body must be a JSON object");
  return std::nullopt;
}

// Strict tools constrain the answer (server/tool_call_grammar.h): the calls by their tools'
// schemas and, with response_format (json_object or json_schema), the text besides them.
std::optional<ApiError> constrain_tool_calls(ToolCallFormat format, ChatRequest& r) {
  using Kind = OutputConstraint::Kind;
  const OutputConstraint& c = r.options.constraint;
  ojson content;  // null: free text
  if (c.kind == Kind::kJsonObject) content = {{"type", "object"}};
  if (c.kind == Kind::kJsonSchema) content = ojson::parse(c.text, nullptr, false);
  auto text = tool_call_constraint_text(format, r.tool_choice, r.tool_choice_function, r.tools, content);
  if (!text.ok())
    return api_error(400, text.status().message(), "invalid_request_error",
                     text.status().field().empty() ? "tools" : text.status().field());
  r.options.constraint = {Kind::kToolCalls, std::move(text).value(), "tools"};
  return std::nullopt;
}

}  // namespace

bool OpenAiService::check_model(const std::string& model, const std::shared_ptr<HttpResponder>& res) {
  if (model.empty() || model == options_.served_model_name) return true;
  fail(res, api_error(404, "the model '" + model + "' does not exist; this server serves '" + options_.served_model_name + "'",
                      "not_found_error", "model", "model_not_found"));
  return false;
}

void OpenAiService::completions(const HttpRequest& req, const std::shared_ptr<HttpResponder>& res) {
  ojson body;
  if (auto e = parse_body(req, body)) return fail(res, *e);
  auto parsed = parse_completion_request(body, options_.limits);
  if (auto* e = std::get_if<ApiError>(&parsed)) return fail(res, *e);
  CompletionRequest& r = std::get<CompletionRequest>(parsed);
  if (!check_model(r.options.model, res)) return;
  if (r.echo && r.options.sampling.wants_logprobs())
    return fail(res, api_error(400, "'echo' together with 'logprobs' (prompt logprobs) is not supported", "invalid_request_error", "echo"));
  if (auto e = constrain(r.options, false)) return fail(res, *e);

  GenerationJob::Setup setup;
  setup.kind = GenerationJob::Kind::kCompletion;
  setup.id = "cmpl-" + random_suffix(next_id_.fetch_add(1));
  setup.model = options_.served_model_name;
  for (auto& p : r.prompts) {
    GenerationJob::Prompt prompt;
    if (p.is_text) {
      auto ids = tokenizer_->encode(p.text, /*add_special_tokens=*/true);
      if (!ids.ok()) return fail(res, api_error(400, "'prompt': " + ids.status().message(), "invalid_request_error", "prompt"));
      prompt.ids = std::move(ids).value();
      if (r.echo) prompt.echo_text = p.text;
    } else {
      prompt.ids = std::move(p.ids);
      if (r.echo) {
        auto text = tokenizer_->decode(prompt.ids, false);
        if (!text.ok()) return fail(res, api_error(400, "'prompt': " + text.status().message(), "invalid_request_error", "prompt"));
        prompt.echo_text = text.value();
      }
    }
    if (prompt.ids.empty()) return fail(res, api_error(400, "'prompt' encodes to no tokens", "invalid_request_error", "prompt"));
    setup.prompts.push_back(std::move(prompt));
  }
  setup.options = std::move(r.options);
  start(std::make_shared<GenerationJob>(std::move(setup), *tokenizer_, res, metrics_), res, 0);
}

void OpenAiService::chat_completions(const HttpRequest& req, const std::shared_ptr<HttpResponder>& res) {
  ojson body;
  if (auto e = parse_body(req, body)) return fail(res, *e);
  auto parsed = parse_chat_request(body, options_.limits);
  if (auto* e = std::get_if<ApiError>(&parsed)) return fail(res, *e);
  ChatRequest& r = std::get<ChatRequest>(parsed);
  if (!check_model(r.options.model, res)) return;
  if (prompt_format_ == chat::PromptFormat::kDeepseekV4) return deepseek_v4_chat_completions(r, res);
  if (!chat_template_) return fail(res, api_error(400, "this model has no chat template; use /v1/completions"));

  // The request chooses template variables, never the template, the server-set arguments or
  // the special tokens.
  const ojson& kwargs = r.chat_template_kwargs;
  for (const auto& [key, value] : kwargs.items())
    if (reserved_template_variable(key))
      return fail(res, api_error(400, "'chat_template_kwargs' may not set '" + key + "': the server sets it",
                                 "invalid_request_error", "chat_template_kwargs"));
  const bool use_tools = !r.tools.is_null() && r.tool_choice != "none";
  auto rendered = chat_template_->render(r.messages, use_tools ? r.tools : ojson(nullptr), r.add_generation_prompt, kwargs);
  if (!rendered.ok()) return fail(res, api_error(400, "chat template: " + rendered.status().message(), "invalid_request_error", "messages"));
  // "required" and named functions start the answer with the template's tool-call markers.
  const std::string forced = forced_tool_call_prefix(tool_call_format_, r.tool_choice, r.tool_choice_function);
  if ((r.tool_choice == "required" || r.tool_choice == "function") && forced.empty())
    return fail(res, api_error(400, "tool_choice '" + r.tool_choice + "' is not supported with this model's chat template",
                               "invalid_request_error", "tool_choice"));
  if (use_tools && has_strict_tools(r.tools))
    if (auto e = constrain_tool_calls(tool_call_format_, r)) return fail(res, *e);
  ChatOutputConfig output;
  output.parse_tool_calls = use_tools;
  output.forced_prefix = forced;
  if (reasoning_model_) {
    output.parse_reasoning = true;
    output.reasoning_open = chat::prompt_opens_reasoning(rendered.value());
  }
  start_chat(r, rendered.value() + forced, output, res);
}

void OpenAiService::start_chat(ChatRequest& r, const std::string& prompt, const ChatOutputConfig& output,
                               const std::shared_ptr<HttpResponder>& res) {
  // The constraint starts after the reasoning, unless the forced prefix has closed it already.
  const bool after_reasoning = output.parse_reasoning && output.reasoning_open &&
                               output.forced_prefix.find("</think>") == std::string::npos;
  if (auto e = constrain(r.options, after_reasoning)) return fail(res, *e);
  auto ids = tokenizer_->encode(prompt, /*add_special_tokens=*/false);
  if (!ids.ok()) return fail(res, api_error(400, ids.status().message(), "invalid_request_error", "messages"));
  SamplingParams& sampling = r.options.sampling;
  if (sampling.max_tokens == 0 && options_.default_max_tokens > 0)  // neither max_tokens nor max_completion_tokens
    sampling.max_tokens = std::max(1, std::min(options_.default_max_tokens,
                                               engine_->max_model_len() - int(ids.value().size())));
  GenerationJob::Setup setup;
  setup.kind = GenerationJob::Kind::kChat;
  setup.id = "chatcmpl-" + random_suffix(next_id_.fetch_add(1));
  setup.model = options_.served_model_name;
  setup.prompts.push_back({std::move(ids).value(), ""});
  setup.chat = output;
  setup.options = std::move(r.options);
  start(std::make_shared<GenerationJob>(std::move(setup), *tokenizer_, res, metrics_), res, 0);
}

void OpenAiService::deepseek_v4_chat_completions(ChatRequest& r, const std::shared_ptr<HttpResponder>& res) {
  auto rendered = render_deepseek_v4_chat(r);
  if (auto* e = std::get_if<ApiError>(&rendered)) return fail(res, *e);
  const DeepseekV4Chat& v4 = std::get<DeepseekV4Chat>(rendered);
  ChatOutputConfig output;
  output.deepseek_v4 = true;
  output.parse_reasoning = output.reasoning_open = v4.thinking;
  output.parse_tool_calls = !r.tools.is_null() && r.tool_choice != "none";
  if (output.parse_tool_calls && has_strict_tools(r.tools))
    if (auto e = constrain_tool_calls(ToolCallFormat::kDeepseekV4, r)) return fail(res, *e);
  output.forced_prefix = v4.forced_prefix;
  start_chat(r, v4.prompt + v4.forced_prefix, output, res);
}

std::optional<ApiError> OpenAiService::constrain(GenerationOptions& o, bool after_reasoning) {
  const OutputConstraint& c = o.constraint;
  if (c.kind == OutputConstraint::Kind::kNone) return std::nullopt;
  if (!grammars_)
    return api_error(400, "structured output is not available for this model's tokenizer: " + grammars_error_,
                     "invalid_request_error", c.param);
  auto masks = grammars_->get(c);
  if (!masks.ok())
    return api_error(400, masks.status().message(), "invalid_request_error",
                     masks.status().field().empty() ? c.param : masks.status().field());
  auto constraint = std::make_shared<GrammarConstraint>();
  constraint->masks = std::move(masks).value();
  if (after_reasoning) {
    const std::optional<int32_t> end = tokenizer_->token_to_id("</think>");
    if (!end)
      return api_error(400, "'" + c.param + "' with reasoning needs a </think> token in the vocabulary",
                       "invalid_request_error", c.param);
    constraint->start_after_token = *end;
  }
  o.sampling.constraint = std::move(constraint);
  return std::nullopt;
}

void OpenAiService::start(std::shared_ptr<GenerationJob> job, const std::shared_ptr<HttpResponder>& res, int priority) {
  const auto& setup = job->setup();
  const int max_len = engine_->max_model_len();
  for (const auto& p : setup.prompts) {
    const int n_prompt = int(p.ids.size()), n_out = setup.options.sampling.max_tokens;
    if (n_prompt + std::max(n_out, 1) > max_len) {
      return fail(res, api_error(400, "this model's maximum context length is " + std::to_string(max_len) +
                                     " tokens, but the request asks for " + std::to_string(n_prompt + n_out) + " (" +
                                     std::to_string(n_prompt) + " in the prompt, " + std::to_string(n_out) +
                                     " for the completion)",
                            "invalid_request_error", "max_tokens", "context_length_exceeded"));
    }
  }
  const EngineStats stats = engine_->stats();
  const size_t waiting = std::max<size_t>(size_t(stats.n_waiting), pump_.n_active() > size_t(stats.n_running)
                                                                        ? pump_.n_active() - size_t(stats.n_running)
                                                                        : 0);
  if (waiting >= size_t(options_.max_queued_requests))
    return fail(res, api_error(429, "too many requests are waiting (" + std::to_string(waiting) + "); retry later",
                               "rate_limit_error", "", "queue_full"),
                {{"Retry-After", "1"}});
  if (options_.request_timeout_seconds > 0)
    job->set_deadline(GenerationJob::Clock::now() +
                      std::chrono::milliseconds(int64_t(options_.request_timeout_seconds * 1000)));

  // Prefill/decode: the prompts' leading blocks from the prefill worker the router named, before
  // any byte of the answer goes out (a failure is a 503 the router may retry elsewhere).
  std::vector<std::vector<PinnedBlock>> pins(setup.prompts.size());
  auto unpin_from = [&](size_t first) {
    for (size_t j = first; j < pins.size(); ++j)
      if (!pins[j].empty()) engine_->post([p = std::move(pins[j])](EngineCore& core) { core.unpin(p); });
  };
  const std::string& prefill_url = static_cast<const CountingResponder&>(*res).prefill_url();
  if (pd_.fetch_prefix && !prefill_url.empty()) {
    for (size_t i = 0; i < setup.prompts.size(); ++i) {
      auto fetched = pd_.fetch_prefix(prefill_url, setup.prompts[i].ids, [res] { return res->disconnected(); });
      if (!fetched.ok()) {
        unpin_from(0);
        const Status& st = fetched.status();
        if (!st.field().empty()) return fail(res, api_error(400, st.message(), "invalid_request_error", st.field()));
        return fail(res, api_error(503, "the remote prefill failed: " + st.message(), "service_unavailable", "", "prefill_failed"),
                    {{"X-DeepInfer-Retry", "prefill"}});
      }
      pins[i] = std::move(fetched).value();
    }
  }

  std::weak_ptr<GenerationJob> weak = job;
  std::vector<RequestHandle> handles;
  for (size_t i = 0; i < setup.prompts.size(); ++i) {
    const auto& p = setup.prompts[i];
    Request request{p.ids, setup.options.sampling, priority};
    auto handle = engine_->submit_pinned(std::move(request), std::move(pins[i]), [this, weak] {
      if (auto j = weak.lock()) pump_.notify(j);
    });
    if (!handle.ok()) {
      unpin_from(i + 1);
      for (auto& h : handles) engine_->abort(h.id());
      std::string field = handle.status().field();
      if (field == "prompt" && setup.kind == GenerationJob::Kind::kChat) field = "messages";
      return fail(res, api_error(400, handle.status().message(), "invalid_request_error", field));
    }
    handles.push_back(std::move(handle).value());
  }
  job->attach(std::move(handles), engine_);
  res->on_disconnect([this, weak] {
    if (auto j = weak.lock()) {
      j->abort("client disconnected");
      pump_.notify(j);
    }
  });
  pump_.add(std::move(job));
}

void OpenAiService::tokenize(const HttpRequest& req, const std::shared_ptr<HttpResponder>& res) {
  ojson body;
  if (auto e = parse_body(req, body)) return fail(res, *e);
  if (body.contains("model") && body["model"].is_string() && !check_model(body["model"].get<std::string>(), res)) return;
  bool add_special = true;
  if (body.contains("add_special_tokens")) {
    if (!body["add_special_tokens"].is_boolean()) return fail(res, api_error(400, "'add_special_tokens' must be true or false", "invalid_request_error", "add_special_tokens"));
    add_special = body["add_special_tokens"].get<bool>();
  }
  std::string text;
  if (body.contains("prompt")) {
    if (!body["prompt"].is_string()) return fail(res, api_error(400, "'prompt' must be a string", "invalid_request_error", "prompt"));
    text = body["prompt"].get<std::string>();
  } else if (body.contains("messages") && prompt_format_ == chat::PromptFormat::kDeepseekV4) {
    auto parsed = parse_chat_request(body, options_.limits);
    if (auto* e = std::get_if<ApiError>(&parsed)) return fail(res, *e);
    auto v4 = render_deepseek_v4_chat(std::get<ChatRequest>(parsed));
    if (auto* e = std::get_if<ApiError>(&v4)) return fail(res, *e);
    text = std::get<DeepseekV4Chat>(v4).prompt;
    add_special = false;
  } else if (body.contains("messages")) {
    ojson chat_body = body;
    auto parsed = parse_chat_request(chat_body, options_.limits);
    if (auto* e = std::get_if<ApiError>(&parsed)) return fail(res, *e);
    if (!chat_template_) return fail(res, api_error(400, "this model has no chat template"));
    auto& r = std::get<ChatRequest>(parsed);
    auto rendered = chat_template_->render(r.messages, r.tools, r.add_generation_prompt, ojson::object());
    if (!rendered.ok()) return fail(res, api_error(400, "chat template: " + rendered.status().message()));
    text = rendered.value();
    add_special = false;
  } else {
    return fail(res, api_error(400, "give 'prompt' (a string) or 'messages'", "invalid_request_error", "prompt"));
  }
  auto ids = tokenizer_->encode(text, add_special);
  if (!ids.ok()) return fail(res, api_error(400, ids.status().message(), "invalid_request_error", "prompt"));
  reply(res, 200, {{"tokens", ids.value()}, {"count", ids.value().size()}, {"max_model_len", engine_->max_model_len()}});
}

void OpenAiService::detokenize(const HttpRequest& req, const std::shared_ptr<HttpResponder>& res) {
  ojson body;
  if (auto e = parse_body(req, body)) return fail(res, *e);
  if (body.contains("model") && body["model"].is_string() && !check_model(body["model"].get<std::string>(), res)) return;
  if (!body.contains("tokens") || !body["tokens"].is_array())
    return fail(res, api_error(400, "'tokens' must be a list of token ids", "invalid_request_error", "tokens"));
  std::vector<int32_t> ids;
  for (const auto& t : body["tokens"]) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= options_.limits.vocab_size)
      return fail(res, api_error(400, "'tokens' holds " + t.dump() + ", which is not a token id of this model",
                                 "invalid_request_error", "tokens"));
    ids.push_back(t.get<int32_t>());
  }
  auto text = tokenizer_->decode(ids, false);
  if (!text.ok()) return fail(res, api_error(400, text.status().message(), "invalid_request_error", "tokens"));
  reply(res, 200, {{"prompt", text.value()}});
}

}  // namespace deepinfer
