#include "dist/router/relay.h"

#include <boost/asio/post.hpp>

#include <algorithm>

#include "server/openai_request.h"

namespace deepinfer::router {
namespace {

constexpr size_t kMaxRetryDetail = 2048;
constexpr size_t kMaxPartialEvent = 1u << 20;  // an event longer than this is passed on in pieces

std::string error_body(const std::string& message, const std::string& type, const std::string& code) {
  ApiError e;
  e.message = message;
  e.type = type;
  e.code = code;
  return e.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The message of an OpenAI error body, or the text itself (cut) when it is not one.
std::string error_message(const std::string& body) {
  const auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("error") && j["error"].is_object() && j["error"].contains("message") &&
      j["error"]["message"].is_string())
    return j["error"]["message"].get<std::string>();
  return body.substr(0, 200);
}

bool starts_with_ci(const std::string& s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}

}  // namespace

Relay::Relay(RouterContext& ctx, HttpRequest request, std::shared_ptr<HttpResponder> responder, std::string endpoint,
             uint64_t affinity_key)
    : ctx_(ctx), request_(std::move(request)), responder_(std::move(responder)), endpoint_(std::move(endpoint)),
      affinity_key_(affinity_key) {
  ctx_.n_active.fetch_add(1);
}

void Relay::start() {
  std::weak_ptr<Relay> weak = weak_from_this();
  auto& ioc = ctx_.pool.ioc();
  responder_->on_disconnect([weak, &ioc] {
    boost::asio::post(ioc, [weak] {
      auto self = weak.lock();
      if (!self || self->finished_) return;
      self->client_gone_ = true;
      if (self->stream_) self->stream_->cancel();
    });
  });
  boost::asio::post(ioc, [self = shared_from_this()] { self->attempt(); });
}

void Relay::attempt() {
  if (client_gone_) return finish(Outcome::kCancelled);
  phase_ = Phase::kHead;
  status_ = 0;
  body_.clear();
  pass_headers_.clear();
  decode_ = ctx_.registry.acquire_decode(failed_decode_);
  if (!decode_) {
    if (!failed_decode_.empty())
      return fail(502, "no decode worker accepted the connection (tried " + std::to_string(failed_decode_.size()) + ")",
                  "upstream_error", "decode_unavailable", Outcome::kUpstreamFailed);
    return fail(503, "no decode worker is available", "service_unavailable", "no_decode_worker", Outcome::kNoWorker);
  }
  prefill_ = ctx_.registry.acquire_prefill(affinity_key_, failed_prefill_);

  bench::HttpRequestSpec spec;
  spec.method = request_.method;
  spec.path = request_.target;
  spec.headers.emplace_back("User-Agent", "deepinfer-router");
  const std::string content_type = request_.header("content-type");
  spec.headers.emplace_back("Content-Type", content_type.empty() ? "application/json" : content_type);
  if (const std::string accept = request_.header("accept"); !accept.empty()) spec.headers.emplace_back("Accept", accept);
  if (prefill_) spec.headers.emplace_back(std::string(kPrefillUrlHeader), ctx_.registry.url(*prefill_));
  spec.body = request_.body;

  auto self = shared_from_this();
  stream_ = ctx_.pool.client(*decode_).stream(
      std::move(spec), ctx_.options.upstream, [self](const bench::HttpResponseHead& head) { self->on_head(head); },
      [self](std::string_view bytes, std::function<void()> resume) { self->on_body(bytes, std::move(resume)); },
      [self](const bench::HttpResult& result) { self->on_done(result); });
}

void Relay::on_head(const bench::HttpResponseHead& head) {
  status_ = head.status;
  content_type_ = head.header("content-type");
  std::vector<size_t> tried = failed_prefill_;
  if (prefill_) tried.push_back(*prefill_);
  action_ = upstream_action(head.status, head.header(kRetryHeader), prefill_.has_value(),
                            ctx_.registry.prefill_available(tried));
  if (action_ != UpstreamAction::kRelay) {
    phase_ = Phase::kDiscard;
    return;
  }
  for (const char* name : {"retry-after", "www-authenticate"})
    if (std::string v = head.header(name); !v.empty()) pass_headers_.emplace_back(name, v);
  if (head.status >= 200 && head.status < 300 && starts_with_ci(content_type_, "text/event-stream")) {
    phase_ = Phase::kStream;
    responder_->begin_stream(head.status, content_type_, pass_headers_);
  } else {
    phase_ = Phase::kBuffer;
  }
}

void Relay::on_body(std::string_view bytes, std::function<void()> resume) {
  switch (phase_) {
    case Phase::kStream: {
      // Whole events only (they end in a blank line), so that a cut stream never shows half of one.
      partial_event_.append(bytes);
      size_t end = 0;
      for (std::string_view blank : {"\n\n", "\r\n\r\n", "\r\r"})
        if (size_t at = partial_event_.rfind(blank); at != std::string::npos) end = std::max(end, at + blank.size());
      if (partial_event_.size() > kMaxPartialEvent) end = partial_event_.size();
      if (end == 0) return resume();
      std::string ready = partial_event_.substr(0, end);
      partial_event_.erase(0, end);
      responder_->write(std::move(ready));
      responder_->when_flushed(std::move(resume));
      return;
    }
    case Phase::kBuffer:
      if (body_.size() + bytes.size() > ctx_.options.max_response_bytes) {
        too_large_ = true;
        stream_->cancel();
        return;
      }
      body_.append(bytes);
      return resume();
    case Phase::kDiscard:
      if (body_.size() < kMaxRetryDetail) body_.append(bytes.substr(0, kMaxRetryDetail - body_.size()));
      return resume();
    case Phase::kHead:
      return resume();
  }
}

void Relay::release_workers() {
  if (decode_) ctx_.registry.release(*decode_);
  if (prefill_) ctx_.registry.release(*prefill_);
}

void Relay::on_done(const bench::HttpResult& result) {
  release_workers();
  stream_.reset();
  const size_t decode = *decode_;
  const std::string& decode_url = ctx_.registry.url(decode);
  if (client_gone_) return finish(Outcome::kCancelled);
  if (too_large_)
    return fail(502, "the decode worker's answer exceeds the router's limit of " +
                         std::to_string(ctx_.options.max_response_bytes) + " bytes",
                "upstream_error", "response_too_large", Outcome::kUpstreamFailed);
  if (result.error.empty()) {
    switch (phase_) {
      case Phase::kStream:
        count(Outcome::kSuccess);
        responder_->write(std::move(partial_event_));
        responder_->end();
        return finish(Outcome::kSuccess);
      case Phase::kBuffer:
        count(status_ < 400 ? Outcome::kSuccess : Outcome::kWorkerError);
        responder_->send(status_, content_type_.empty() ? "application/json" : content_type_, std::move(body_),
                         pass_headers_);
        return finish(status_ < 400 ? Outcome::kSuccess : Outcome::kWorkerError);
      case Phase::kDiscard:
        failed_prefill_.push_back(*prefill_);
        if (action_ == UpstreamAction::kRetryPrefill) {
          ctx_.metrics.n_prefill_retries.fetch_add(1);
          return attempt();
        }
        return fail(503, "the prompt could not be prefilled: every prefill worker tried failed (" +
                             std::to_string(failed_prefill_.size()) + "; last: " + error_message(body_) + ")",
                    "service_unavailable", "prefill_unavailable", Outcome::kPrefillFailed);
      case Phase::kHead:
        break;
    }
  }
  // The decode worker failed: connect, timeout or transport.
  ctx_.metrics.count_upstream_error("decode", decode_url, result.error);
  ctx_.registry.report_failure(decode, WorkerRegistry::Clock::now());
  if (result.error == "connect" && phase_ == Phase::kHead) {
    failed_decode_.push_back(decode);
    ctx_.metrics.n_decode_retries.fetch_add(1);
    return attempt();
  }
  const std::string why = result.error == "timeout" ? "timed out" : "failed (" + result.detail + ")";
  const std::string message = "the decode worker " + decode_url + " " + why;
  if (phase_ == Phase::kStream) {
    count(Outcome::kUpstreamFailed);
    responder_->write("data: " + error_body(message, "upstream_error", "decode_failed") + "\n\ndata: [DONE]\n\n");
    responder_->end();
    return finish(Outcome::kUpstreamFailed);
  }
  fail(502, message, "upstream_error", "decode_failed", Outcome::kUpstreamFailed);
}

void Relay::fail(int status, const std::string& message, const std::string& type, const std::string& code,
                 Outcome outcome) {
  count(outcome);
  responder_->send(status, "application/json", error_body(message, type, code),
                   status == 503 ? bench::HeaderList{{"Retry-After", "1"}} : bench::HeaderList{});
  finish(outcome);
}

void Relay::count(Outcome outcome) {
  if (counted_) return;
  counted_ = true;
  ctx_.metrics.count(endpoint_, outcome);
}

void Relay::finish(Outcome outcome) {
  if (finished_) return;
  finished_ = true;
  count(outcome);
  ctx_.n_active.fetch_sub(1);
}

}  // namespace deepinfer::router
