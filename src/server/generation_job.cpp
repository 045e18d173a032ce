#include "server/generation_job.h"

#include <ctime>

namespace deepinfer {
namespace {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json bytes_of(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back(int(c));
  return out;
}

// Completions' logprobs shape from chat-shaped entries; `offset` is the text offset of the
// first token, advanced past each.
json completion_logprobs(const std::vector<json>& entries, size_t& offset) {
  json lp = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
             {"text_offset", json::array()}};
  for (const auto& e : entries) {
    lp["tokens"].push_back(e["token"]);
    lp["token_logprobs"].push_back(e["logprob"]);
    json top = json::object();
    for (const auto& t : e["top_logprobs"]) top[t["token"].get<std::string>()] = t["logprob"];
    lp["top_logprobs"].push_back(top);
    lp["text_offset"].push_back(offset);
    offset += e["token"].get<std::string>().size();
  }
  return lp;
}

}  // namespace

struct GenerationJob::Choice {
  Choice(int index, const Tokenizer& tok, const std::vector<std::string>& stops, const ChatOutputConfig& chat)
      : index(index), detok(tok, /*skip_special_tokens=*/true), stop(stops), chat(chat) {}
  int index;
  IncrementalDetokenizer detok;
  StopMatcher stop;
  ChatOutput chat;
  bool done = false;
  std::string finish_reason;
  int n_tokens = 0;
  std::string text;                  // non-streaming: the whole text (completions) or content (chat)
  std::string reasoning;             // chat, non-streaming
  json tool_calls = json::array();   // chat, non-streaming: merged deltas
  std::vector<json> logprobs;        // non-streaming: chat-shaped entries
  size_t text_offset = 0;            // completions: offset of the next token's text
  bool echoed = false;               // completions, streaming: the prompt's echo was sent
  Clock::time_point last_token{};
};

GenerationJob::GenerationJob(Setup setup, Tokenizer tokenizer, std::shared_ptr<HttpResponder> responder,
                             ServerMetrics& metrics)
    : setup_(std::move(setup)), tokenizer_(std::move(tokenizer)), responder_(std::move(responder)), metrics_(metrics),
      arrival_(Clock::now()), created_(int64_t(std::time(nullptr))) {
  const int n = setup_.options.sampling.n;
  for (size_t p = 0; p < setup_.prompts.size(); ++p)
    for (int s = 0; s < n; ++s) {
      choices_.push_back(std::make_unique<Choice>(int(p) * n + s, tokenizer_, setup_.options.stop, setup_.chat));
      choices_.back()->text_offset = setup_.prompts[p].echo_text.size();
    }
  n_cached_.assign(setup_.prompts.size(), 0);
  engine_done_.assign(setup_.prompts.size(), false);
}

GenerationJob::~GenerationJob() = default;

void GenerationJob::attach(std::vector<RequestHandle> handles, Engine* engine) {
  std::lock_guard lock(pump_mu_);
  handles_ = std::move(handles);
  engine_ = engine;
}

void GenerationJob::abort(const std::string& reason) {
  {
    std::lock_guard lock(abort_mu_);
    if (abort_reason_.empty()) abort_reason_ = reason;
  }
  for (auto& h : handles_) engine_->abort(h.id());
}

json GenerationJob::logprob_entry(int32_t token, const TokenLogprobs& lp) const {
  auto text_of = [&](int32_t id) {
    auto t = tokenizer_.decode(std::span<const int32_t>(&id, 1), false);
    return t.ok() ? t.value() : std::string();
  };
  const std::string text = text_of(token);
  json top = json::array();
  for (const auto& t : lp.top) {
    const std::string s = text_of(t.token);
    top.push_back({{"token", s}, {"logprob", t.logprob}, {"bytes", bytes_of(s)}});
  }
  return {{"token", text}, {"logprob", lp.logprob}, {"bytes", bytes_of(text)}, {"top_logprobs", top}};
}

bool GenerationJob::pump() {
  std::lock_guard lock(pump_mu_);
  if (completed_) return true;
  if (responder_->disconnected()) abort("client disconnected");
  for (size_t p = 0; p < handles_.size(); ++p) {
    while (auto update = handles_[p].stream().try_next()) consume(p, *update);
    if (handles_[p].stream().done()) engine_done_[p] = true;
  }
  bool all_done = true;
  for (auto& c : choices_) all_done &= c->done;
  if (all_done) {
    // Samples that stopped on a stop string may still run in the engine.
    for (size_t p = 0; p < handles_.size(); ++p)
      if (!engine_done_[p]) engine_->abort(handles_[p].id());
    complete();
  }
  return completed_;
}

void GenerationJob::fail_internal() noexcept {
  try {
    std::lock_guard lock(pump_mu_);
    if (completed_) return;
    completed_ = true;
    for (size_t p = 0; p < handles_.size(); ++p)
      if (!engine_done_[p]) engine_->abort(handles_[p].id());
    if (responder_->disconnected()) return;
    ApiError e;
    e.status = 500;
    e.type = "internal_error";
    e.message = "internal error while producing the response";
    if (stream_started_) {
      write_event(e.to_json());
      responder_->write("data: [DONE]\n\n");
      responder_->end();
    } else {
      responder_->send(e.status, "application/json", dump(e.to_json()));
    }
  } catch (...) {
  }
}

void GenerationJob::consume(size_t prompt_index, const RequestOutput& u) {

  n_cached_[prompt_index] = u.n_cached_tokens;
  Choice& c = *choices_[prompt_index * size_t(setup_.options.sampling.n) + size_t(u.sample_index)];
  if (c.done) return;
  const Clock::time_point now = Clock::now();
  if (!u.token_ids.empty()) {
    if (c.n_tokens == 0) metrics_.time_to_first_token.observe(std::chrono::duration<double>(now - arrival_).count());
    else {
      const double gap = std::chrono::duration<double>(now - c.last_token).count() / double(u.token_ids.size());
      for (size_t i = 0; i < u.token_ids.size(); ++i) metrics_.inter_token_latency.observe(gap);
    }
    c.last_token = now;
  }
  const bool want_logprobs = setup_.options.sampling.wants_logprobs();
  std::string text;
  std::vector<json> entries;
  for (size_t i = 0; i < u.token_ids.size() && !c.done; ++i) {
    ++c.n_tokens;
    metrics_.generation_tokens.fetch_add(1);
    if (want_logprobs && i < u.logprobs.size()) entries.push_back(logprob_entry(u.token_ids[i], u.logprobs[i]));
    auto piece = c.detok.push(u.token_ids[i]);
    if (!piece.ok()) continue;  // ids come from the model's own vocabulary
    auto out = c.stop.push(piece.value());
    text += out.text;
    if (out.stopped) {
      emit_text(c, text, entries, true);
      return finish_choice(c, FinishReason::kStop);
    }
  }
  if (u.finished()) {
    auto rest = c.detok.finish();
    if (rest.ok()) {
      auto out = c.stop.push(rest.value());
      text += out.text;
      if (!out.stopped) text += c.stop.flush();
    }
    emit_text(c, text, entries, true);
    return finish_choice(c, u.finish_reason);
  }
  emit_text(c, text, entries, false);
}

void GenerationJob::emit_text(Choice& c, const std::string& text, std::vector<json>& entries, bool final) {
  json delta = json::object();
  if (setup_.kind == Kind::kCompletion) {
    if (text.empty() && entries.empty()) return;
    if (!setup_.options.stream) {
      c.text += text;
      for (auto& e : entries) c.logprobs.push_back(std::move(e));
      return;
    }
    delta["text"] = text;
  } else {
    ChatDelta d = c.chat.push(text);
    if (final) {
      ChatDelta rest = c.chat.finish();
      d.content += rest.content;
      d.reasoning += rest.reasoning;
      for (auto& t : rest.tool_calls) d.tool_calls.push_back(t);
    }
    if (d.empty() && entries.empty()) return;
    if (!setup_.options.stream) {
      c.text += d.content;
      c.reasoning += d.reasoning;
      for (auto& t : d.tool_calls) {
        const size_t idx = t.value("index", size_t(0));
        if (idx >= c.tool_calls.size()) {
          c.tool_calls.push_back({{"id", t.value("id", "")}, {"type", "function"},
                                  {"function", {{"name", ""}, {"arguments", ""}}}});
        }
        json& call = c.tool_calls[idx];
        if (t.contains("id")) call["id"] = t["id"];
        if (t.contains("function")) {
          if (t["function"].contains("name")) call["function"]["name"] = t["function"]["name"];
          if (t["function"].contains("arguments"))
            call["function"]["arguments"] = call["function"]["arguments"].get<std::string>() +
                                            t["function"]["arguments"].get<std::string>();
        }
      }
      for (auto& e : entries) c.logprobs.push_back(std::move(e));
      return;
    }
    if (!d.content.empty()) delta["content"] = d.content;
    if (!d.reasoning.empty()) delta["reasoning_content"] = d.reasoning;
    if (!d.tool_calls.empty()) delta["tool_calls"] = d.tool_calls;
  }
  send_stream_chunk(c, std::move(delta), entries, "");
}

void GenerationJob::finish_choice(Choice& c, FinishReason reason) {
  c.done = true;
  c.finish_reason = reason == FinishReason::kNone ? "stop" : std::string(finish_reason_name(reason));
  if (setup_.kind == Kind::kChat && reason == FinishReason::kStop && c.chat.saw_tool_calls())
    c.finish_reason = "tool_calls";
  if (setup_.options.stream && reason != FinishReason::kAbort && reason != FinishReason::kError)
    send_stream_chunk(c, json::object(), {}, c.finish_reason);
}

void GenerationJob::write_event(const json& j) {
  if (!stream_started_) {
    responder_->begin_stream(200, "text/event-stream");
    stream_started_ = true;
  }
  responder_->write("data: " + dump(j) + "\n\n");
}

void GenerationJob::send_stream_chunk(Choice& c, json delta, const std::vector<json>& logprobs,
                                      const std::string& finish_reason) {
  json choice = {{"index", c.index}};
  json lp = nullptr;
  if (setup_.options.sampling.wants_logprobs() && !logprobs.empty()) {
    if (setup_.kind == Kind::kChat) {
      lp = {{"content", logprobs}};
    } else {
      lp = completion_logprobs(logprobs, c.text_offset);
    }
  }
  if (setup_.kind == Kind::kChat) {
    if (!c.echoed) delta["role"] = "assistant";
    choice["delta"] = std::move(delta);
  } else {
    std::string text = delta.value("text", "");
    if (!c.echoed) text = setup_.prompts[size_t(c.index / setup_.options.sampling.n)].echo_text + text;
    choice["text"] = text;
  }
  c.echoed = true;
  choice["logprobs"] = lp;
  choice["finish_reason"] = finish_reason.empty() ? json(nullptr) : json(finish_reason);
  write_event({{"id", setup_.id},
               {"object", setup_.kind == Kind::kChat ? "chat.completion.chunk" : "text_completion"},
               {"created", created_},
               {"model", setup_.model},
               {"choices", json::array({choice})}});
}

json GenerationJob::usage() const {
  int prompt = 0, completion = 0, cached = 0;
  for (size_t p = 0; p < setup_.prompts.size(); ++p) {
    prompt += int(setup_.prompts[p].ids.size());
    cached += n_cached_[p];
  }
  for (const auto& c : choices_) completion += c->n_tokens;
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

void GenerationJob::complete() {
  completed_ = true;

  std::string abort_reason;
  {
    std::lock_guard lock(abort_mu_);
    abort_reason = abort_reason_;
  }
  bool engine_error = false;
  for (const auto& c : choices_) engine_error |= c->finish_reason == "error";
  metrics_.e2e_latency.observe(std::chrono::duration<double>(Clock::now() - arrival_).count());
  const json u = usage();
  metrics_.prompt_tokens.fetch_add(uint64_t(u["prompt_tokens"].get<int>()));
  metrics_.cached_prompt_tokens.fetch_add(uint64_t(u["prompt_tokens_details"]["cached_tokens"].get<int>()));
  if (responder_->disconnected()) return;

  if (!abort_reason.empty() || engine_error) {
    ApiError e;
    e.status = abort_reason.empty() ? 500 : (abort_reason.find("timed out") != std::string::npos ? 408 : 503);
    e.type = e.status == 500 ? "internal_error" : "timeout_or_shutdown";
    e.message = abort_reason.empty() ? "the engine stopped before the request finished" : abort_reason;
    if (abort_reason.empty() && setup_.options.constraint.kind != OutputConstraint::Kind::kNone) {
      // A constrained sample ends in error when its matcher passed a limit or its time budget.
      const std::string& param = setup_.options.constraint.param;
      e.status = 400;
      e.type = "invalid_request_error";
      e.param = param;
      e.message = "'" + param + "' is too costly to match: generation stopped where its matcher passed the "
                  "grammar engine's limits (states, parses alive, or time per token); simplify it";
    }
    if (stream_started_) {
      write_event(e.to_json());
      responder_->write("data: [DONE]\n\n");
      responder_->end();
    } else {
      responder_->send(e.status, "application/json", dump(e.to_json()));
    }
    return;
  }

  if (setup_.options.stream) {
    if (!stream_started_) write_event({{"id", setup_.id},
                                       {"object", setup_.kind == Kind::kChat ? "chat.completion.chunk" : "text_completion"},
                                       {"created", created_}, {"model", setup_.model}, {"choices", json::array()}});
    if (setup_.options.include_usage)
      write_event({{"id", setup_.id},
                   {"object", setup_.kind == Kind::kChat ? "chat.completion.chunk" : "text_completion"},
                   {"created", created_}, {"model", setup_.model}, {"choices", json::array()}, {"usage", u}});
    responder_->write("data: [DONE]\n\n");
    responder_->end();
    return;
  }

  json choices = json::array();
  for (const auto& c : choices_) {
    json choice = {{"index", c->index}, {"finish_reason", c->finish_reason}};
    const bool want_lp = setup_.options.sampling.wants_logprobs();
    if (setup_.kind == Kind::kCompletion) {
      const std::string& echo = setup_.prompts[size_t(c->index / setup_.options.sampling.n)].echo_text;
      choice["text"] = echo + c->text;
      size_t offset = echo.size();
      choice["logprobs"] = want_lp ? completion_logprobs(c->logprobs, offset) : json(nullptr);
    } else {
      json message = {{"role", "assistant"}};
      message["content"] = c->text.empty() && !c->tool_calls.empty() ? json(nullptr) : json(c->text);
      if (!c->reasoning.empty()) message["reasoning_content"] = c->reasoning;
      if (!c->tool_calls.empty()) message["tool_calls"] = c->tool_calls;
      choice["message"] = message;
      choice["logprobs"] = want_lp ? json{{"content", c->logprobs}} : json(nullptr);
    }
    choices.push_back(std::move(choice));
  }
  const json body = {{"id", setup_.id},
                     {"object", setup_.kind == Kind::kChat ? "chat.completion" : "text_completion"},
                     {"created", created_},
                     {"model", setup_.model},
                     {"choices", choices},
                     {"usage", u}};
  responder_->send(200, "application/json", dump(body));
}

}  // namespace deepinfer
