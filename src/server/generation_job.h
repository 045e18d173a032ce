// GenerationJob: one HTTP generation request (/v1/completions or /v1/chat/completions) from
// admission to its last byte. It owns the engine requests (one per prompt; each has n samples),
// turns their token updates into text (incremental detokenizer, stop strings, and for chat the
// reasoning and tool-call parsers), and answers: Server-Sent Events as tokens arrive, or one
// JSON body at the end.
//
// Threads: the engine thread only signals (OutputPump::notify); pump() runs on a pump thread,
// never concurrently for one job; abort() may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "server/chat_output.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_request.h"
#include "server/stop_matcher.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {

class GenerationJob {
 public:
  enum class Kind { kCompletion, kChat };
  using Clock = std::chrono::steady_clock;

  struct Prompt {
    std::vector<int32_t> ids;
    std::string echo_text;  // completions with echo: the prompt's text, prepended to each choice
  };
  struct Setup {
    Kind kind = Kind::kCompletion;
    std::string id;                 // "cmpl-..." / "chatcmpl-..."
    std::string model;
    GenerationOptions options;
    std::vector<Prompt> prompts;
    ChatOutputConfig chat;          // chat only: reasoning and tool-call parsing
  };

  GenerationJob(Setup setup, Tokenizer tokenizer, std::shared_ptr<HttpResponder> responder, ServerMetrics& metrics);
  ~GenerationJob();

  const Setup& setup() const { return setup_; }
  HttpResponder& responder() { return *responder_; }
  // Engine requests, one per prompt, in prompt order (set once, before the first pump()).
  void attach(std::vector<RequestHandle> handles, Engine* engine);

  // Consumes every pending update; writes what is ready. Returns true once the job is complete
  // (response fully written or the client gone).
  bool pump();
  // Stops generating (client gone, timeout, shutdown); the job completes on its next pump().
  void abort(const std::string& reason);
  // After pump() threw (a defect): stops generating and ends the response with a 500 (or an
  // error event, mid-stream); the job is complete. Never throws.
  void fail_internal() noexcept;
  void set_deadline(Clock::time_point t) { deadline_.store(t); }
  bool past_deadline(Clock::time_point now) const { return now >= deadline_.load(); }

  std::atomic<bool> queued{false};  // owned by OutputPump: already in its run queue

 private:
  struct Choice;
  void consume(size_t prompt_index, const RequestOutput& update);
  void emit_text(Choice& c, const std::string& text, std::vector<nlohmann::json>& logprob_entries, bool final);
  void finish_choice(Choice& c, FinishReason reason);
  void send_stream_chunk(Choice& c, nlohmann::json delta, const std::vector<nlohmann::json>& logprobs,
                         const std::string& finish_reason);
  nlohmann::json logprob_entry(int32_t token, const TokenLogprobs& lp) const;
  nlohmann::json usage() const;
  void complete();
  void write_event(const nlohmann::json& j);

  Setup setup_;
  Tokenizer tokenizer_;
  std::shared_ptr<HttpResponder> responder_;
  ServerMetrics& metrics_;
  Engine* engine_ = nullptr;
  std::vector<RequestHandle> handles_;
  std::vector<std::unique_ptr<Choice>> choices_;  // [n_prompts * n]
  std::vector<int> n_cached_;                     // per prompt
  std::vector<bool> engine_done_;                 // per prompt: its stream ended
  bool stream_started_ = false;
  bool completed_ = false;
  std::mutex pump_mu_;                            // pump() runs for one thread at a time
  std::mutex abort_mu_;
  std::string abort_reason_;                      // set by abort(); guarded by abort_mu_
  Clock::time_point arrival_;
  std::atomic<Clock::time_point> deadline_{Clock::time_point::max()};
  int64_t created_ = 0;                           // unix seconds
};

}  // namespace deepinfer
