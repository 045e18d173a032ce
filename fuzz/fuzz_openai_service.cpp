// libFuzzer target for the request handler: `OpenAiService::handle` with a real tokenizer and chat
// template (DeepSeek-V3's, from tests/data) over an engine running a stand-in model
// (tests/engine/fake_causal_lm.h), exactly as `deepinfer serve` wires it behind the HTTP layer.
//
// Input: byte 0 picks the route and method, the rest is the request body. Checks, after every
// input: an answer came (no hang), it is never a 500 (a 500 means an exception escaped a route),
// every error body is OpenAI-shaped JSON, and the engine returns to idle (no request or KV block
// leaked). Build with -DDEEPINFER_FUZZ=ON -DDEEPINFER_SANITIZE=ON; run with
// fuzz/openai_service.dict and the seed corpus in fuzz/corpus/openai_service.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "../tests/engine/fake_causal_lm.h"
#include "chat/chat_template.h"
#include "engine/engine.h"
#include "server/openai_service.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace deepinfer;
using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const std::string& why, const std::string& body) {
  std::fprintf(stderr, "fuzz_openai_service: %s\n%s\n", why.c_str(), body.substr(0, 2000).c_str());
  std::abort();
}

// Records the answer; complete once send() or end() ran.
class CapturingResponder final : public HttpResponder {
 public:
  void send(int status, const std::string&, std::string body, HttpHeaders) override {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = status;
    body_ = std::move(body);
    complete_ = true;
    cv_.notify_all();
  }
  void begin_stream(int status, const std::string&, HttpHeaders) override {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = status;
  }
  void write(std::string chunk) override {
    std::lock_guard<std::mutex> lock(mu_);
    body_ += chunk;
  }
  void end() override {
    std::lock_guard<std::mutex> lock(mu_);
    complete_ = true;
    cv_.notify_all();
  }
  bool disconnected() const override { return false; }
  void on_disconnect(std::function<void()>) override {}

  // Waits until complete or the deadline; true if complete.
  bool wait(Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_until(lock, deadline, [this] { return complete_; });
  }
  int status() {
    std::lock_guard<std::mutex> lock(mu_);
    return status_;
  }
  std::string body() {
    std::lock_guard<std::mutex> lock(mu_);
    return body_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int status_ = 0;
  std::string body_;
  bool complete_ = false;
};

struct Harness {
  std::unique_ptr<Engine> engine;
  std::unique_ptr<OpenAiService> service;
};

Harness& harness() {
  static Harness* h = [] {
    const std::string dir = "tests/data/tokenizers/deepseek-v3";
    auto tokenizer = Tokenizer::Load(dir);
    auto tmpl = chat::ChatTemplate::Load(dir);
    if (!tokenizer.ok() || !tmpl.ok()) fail("run from the project root: cannot load " + dir, "");
    auto model = std::make_unique<test::FakeCausalLM>(int(tokenizer->vocab_size()), 2, std::vector<int32_t>{1});
    EngineOptions options;
    options.kv_cache_memory_bytes = 8u << 20;
    options.block_size = 16;
    auto engine = Engine::create(std::move(model), options);
    if (!engine.ok()) fail(engine.status().message(), "");
    ServeOptions serve;
    serve.served_model_name = "tiny";
    serve.default_max_tokens = 8;
    serve.request_threads = 1;
    auto* out = new Harness{std::move(engine).value(), std::make_unique<OpenAiService>(serve)};
    out->service->attach(out->engine.get(), std::move(tokenizer).value(), std::move(tmpl).value());
    return out;
  }();
  return *h;
}

void check_error_body(int status, const std::string& body) {
  if (status == 200) return;
  const auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object() || !j["error"].contains("message") ||
      !j["error"]["message"].is_string() || !j["error"].contains("param"))
    fail("error body not in OpenAI's shape (status " + std::to_string(status) + ")", body);
}

void wait_idle(Engine& engine) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  for (;;) {
    const EngineStats s = engine.stats();
    if (s.n_running == 0 && s.n_waiting == 0 && s.kv_usage == 0.0) return;
    if (Clock::now() > deadline) fail("the engine did not return to idle", "");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const struct {
    const char* method;
    const char* target;
  } kRoutes[] = {{"POST", "/v1/completions"}, {"POST", "/v1/chat/completions"}, {"POST", "/tokenize"},
                 {"POST", "/detokenize"},     {"GET", "/v1/models"},           {"GET", "/health"},
                 {"GET", "/metrics"},         {"PUT", "/v1/completions"},      {"POST", "/v1/completions?x=1"},
                 {"POST", "/nowhere"}};
  const auto& route = kRoutes[data[0] % (sizeof kRoutes / sizeof kRoutes[0])];
  Harness& h = harness();
  HttpRequest req;
  req.method = route.method;
  req.target = route.target;
  req.body.assign(reinterpret_cast<const char*>(data + 1), size - 1);
  auto res = std::make_shared<CapturingResponder>();
  h.service->handle(std::move(req), res);
  // Generation is capped by the default max_tokens only when the request sets none: give a
  // request that asks for millions of tokens a moment, then abort it like a departing client.
  if (!res->wait(Clock::now() + std::chrono::milliseconds(500))) {
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    do {
      h.service->abort_all("fuzz deadline");  // the job may still have been waiting for a worker
      if (Clock::now() > deadline) fail("no answer after abort", res->body());
    } while (!res->wait(Clock::now() + std::chrono::milliseconds(100)));
  }
  if (res->status() >= 500 && res->status() != 503) fail("status " + std::to_string(res->status()), res->body());
  check_error_body(res->status(), res->body());
  wait_idle(*h.engine);
  return 0;
}
