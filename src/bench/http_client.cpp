#include "bench/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <array>
#include <cctype>
#include <chrono>
#include <limits>
#include <optional>
#include <vector>

namespace deepinfer::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

Result<Endpoint> parse_base_url(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return Status::Error("base URL '" + std::string(url) + "' must start with http:// (TLS is not supported)");
  }
  std::string_view rest = url.substr(kScheme.size());
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  Endpoint e;
  const size_t colon = authority.rfind(':');
  if (colon == std::string_view::npos) {
    e.host = std::string(authority);
    e.port = "80";
  } else {
    e.host = std::string(authority.substr(0, colon));
    e.port = std::string(authority.substr(colon + 1));
  }
  if (e.host.empty() || e.port.empty() || e.port.find_first_not_of("0123456789") != std::string::npos) {
    return Status::Error("base URL '" + std::string(url) + "': expected http://HOST[:PORT][/PREFIX]");
  }
  e.path_prefix = std::string(path);
  return e;
}

struct HttpClient::Pool {
  asio::io_context& ioc;
  Endpoint endpoint;
  std::optional<tcp::resolver::results_type> resolved;
  std::vector<std::unique_ptr<beast::tcp_stream>> idle;  // open keep-alive connections
};

namespace {

constexpr size_t kMaxErrorBody = 500;
constexpr size_t kReadBytes = 64u << 10;  // most bytes one socket read takes in

std::chrono::steady_clock::duration seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

// One request and its response, alive until on_done has run. Benchmark requests have one
// deadline for the whole exchange; relayed ones (stream()) a connect and an idle timeout, the
// response head reported, and a pause after each piece of body until it is resumed.
class Exchange : public HttpClient::Stream, public std::enable_shared_from_this<Exchange> {
 public:
  struct Relay {
    StreamTimeouts timeouts;
    HttpClient::HeadFn on_head;
    HttpClient::PausedBodyFn on_body;
  };

  Exchange(std::shared_ptr<HttpClient::Pool> pool, HttpRequestSpec spec, double timeout_s, HttpClient::BodyFn on_body,
           HttpClient::DoneFn on_done, std::optional<Relay> relay)
      : pool_(std::move(pool)),
        deadline_(std::chrono::steady_clock::now() + seconds(timeout_s)),
        on_body_(std::move(on_body)),
        on_done_(std::move(on_done)),
        relay_(std::move(relay)) {
    request_.method(http::string_to_verb(spec.method));
    if (request_.method() == http::verb::unknown) request_.method_string(spec.method);
    request_.target(pool_->endpoint.path_prefix + spec.path);
    request_.version(11);
    request_.set(http::field::host, pool_->endpoint.host + ":" + pool_->endpoint.port);
    request_.set(http::field::user_agent, "deepinfer-bench");
    request_.keep_alive(true);
    for (auto& [name, value] : spec.headers) request_.set(name, value);
    request_.body() = std::move(spec.body);
    request_.prepare_payload();
    buffer_.reserve(kReadBytes);  // Beast reads only 512 bytes at a time into an empty buffer
  }

  void start() {
    if (!pool_->idle.empty()) {
      stream_ = std::move(pool_->idle.back());
      pool_->idle.pop_back();
      reused_ = true;
      write();
    } else {
      connect();
    }
  }

  void cancel() override {
    asio::post(pool_->ioc, [self = shared_from_this()] {
      if (self->done_) return;
      self->close_stream();
      self->result_.error = "cancelled";
      self->complete();
    });
  }

 private:
  // Arms the stream's timer for the next step.
  void arm(bool connecting) {
    if (!relay_) return stream_->expires_at(deadline_);
    stream_->expires_after(seconds(connecting ? relay_->timeouts.connect_s : relay_->timeouts.idle_s));
  }

  void connect() {
    reused_ = false;
    stream_ = std::make_unique<beast::tcp_stream>(pool_->ioc);
    arm(true);
    if (pool_->resolved) return connect_to(*pool_->resolved);
    auto resolver = std::make_shared<tcp::resolver>(pool_->ioc);
    resolver->async_resolve(pool_->endpoint.host, pool_->endpoint.port,
                            [self = shared_from_this(), resolver](beast::error_code ec, tcp::resolver::results_type r) {
                              if (self->done_) return;
                              if (ec) return self->fail("connect", ec);
                              self->pool_->resolved = r;
                              self->connect_to(r);
                            });
  }

  void connect_to(const tcp::resolver::results_type& endpoints) {
    stream_->async_connect(endpoints, [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
      if (self->done_) return;
      if (ec) return self->fail(ec == beast::error::timeout ? "timeout" : "connect", ec);
      beast::error_code ignored;
      self->stream_->socket().set_option(tcp::no_delay(true), ignored);
      self->write();
    });
  }

  void write() {
    arm(false);
    http::async_write(*stream_, request_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (self->done_) return;
      if (ec) return self->retry_or_fail(ec);
      self->read_header();
    });
  }

  void read_header() {
    parser_.emplace();
    // Not boost::none: Boost 1.74 then rejects every body with a Content-Length.
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    if (relay_) arm(false);
    http::async_read_header(*stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (self->done_) return;
      if (ec) return self->retry_or_fail(ec);
      self->result_.status = self->parser_->get().result_int();
      if (self->relay_) self->report_head();
      if (!self->done_) self->read_body();
    });
  }

  void report_head() {
    HttpResponseHead head;
    head.status = result_.status;
    for (const auto& f : parser_->get()) {
      std::string name(f.name_string());
      for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
      head.headers.emplace_back(std::move(name), std::string(f.value()));
    }
    relay_->on_head(head);
  }

  void read_body() {
    if (parser_->is_done()) return finish();
    auto& body = parser_->get().body();
    body.data = chunk_.data();
    body.size = chunk_.size();
    if (relay_) arm(false);
    http::async_read_some(*stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (self->done_) return;
      if (ec == http::error::need_buffer) ec = {};
      const size_t n = self->chunk_.size() - self->parser_->get().body().size;
      if (self->relay_ && n > 0 && !ec) {
        // The next read waits for the consumer.
        return self->relay_->on_body(std::string_view(self->chunk_.data(), n), [self] {
          asio::post(self->pool_->ioc, [self] {
            if (!self->done_) self->read_body();
          });
        });
      }
      if (n > 0) self->deliver(std::string_view(self->chunk_.data(), n));
      if (ec) return self->fail(ec == beast::error::timeout ? "timeout" : "transport", ec);
      self->read_body();
    });
  }

  bool success() const { return result_.status >= 200 && result_.status < 300; }

  void deliver(std::string_view bytes) {
    if (relay_) {
      relay_->on_body(bytes, [] {});
    } else if (success()) {
      on_body_(bytes);
    } else if (result_.detail.size() < kMaxErrorBody) {
      result_.detail.append(bytes.substr(0, kMaxErrorBody - result_.detail.size()));
    }
  }

  void finish() {
    if (parser_->get().keep_alive() && buffer_.size() == 0) {
      stream_->expires_never();
      pool_->idle.push_back(std::move(stream_));
    }
    if (!success() && !relay_) result_.error = "http_" + std::to_string(result_.status);
    complete();
  }

  // A kept-alive connection the server has since closed fails before any response: retry once.
  void retry_or_fail(beast::error_code ec) {
    if (reused_ && ec != beast::error::timeout) return connect();
    fail(ec == beast::error::timeout ? "timeout" : "transport", ec);
  }

  void fail(const char* kind, beast::error_code ec) {
    close_stream();
    result_.error = kind;
    result_.detail = ec.message();
    complete();
  }

  void close_stream() {
    if (!stream_) return;
    beast::error_code ignored;
    stream_->socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_->close();
  }

  // Runs on_done once and lets go of every callback (and what they hold).
  void complete() {
    done_ = true;
    auto on_done = std::move(on_done_);
    on_body_ = nullptr;
    if (relay_) relay_->on_head = nullptr, relay_->on_body = nullptr;
    on_done(result_);
  }

  std::shared_ptr<HttpClient::Pool> pool_;
  std::chrono::steady_clock::time_point deadline_;
  HttpClient::BodyFn on_body_;
  HttpClient::DoneFn on_done_;
  std::optional<Relay> relay_;
  http::request<http::string_body> request_;
  std::unique_ptr<beast::tcp_stream> stream_;
  bool reused_ = false;
  bool done_ = false;
  beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::buffer_body>> parser_;
  std::array<char, 16384> chunk_;
  HttpResult result_;
};

}  // namespace

HttpClient::HttpClient(asio::io_context& ioc, Endpoint endpoint)
    : pool_(std::make_shared<Pool>(Pool{ioc, std::move(endpoint), std::nullopt, {}})) {}

HttpClient::~HttpClient() = default;

void HttpClient::request(std::string_view path, std::string body, double timeout_s, BodyFn on_body, DoneFn on_done) {
  HttpRequestSpec spec;
  spec.method = body.empty() ? "GET" : "POST";
  spec.path = std::string(path);
  if (!body.empty()) spec.headers = {{"Content-Type", "application/json"}, {"Accept", "text/event-stream"}};
  spec.body = std::move(body);
  std::make_shared<Exchange>(pool_, std::move(spec), timeout_s, std::move(on_body), std::move(on_done), std::nullopt)
      ->start();
}

std::shared_ptr<HttpClient::Stream> HttpClient::stream(HttpRequestSpec spec, StreamTimeouts timeouts, HeadFn on_head,
                                                       PausedBodyFn on_body, DoneFn on_done) {
  auto exchange = std::make_shared<Exchange>(pool_, std::move(spec), 0.0, nullptr, std::move(on_done),
                                             Exchange::Relay{timeouts, std::move(on_head), std::move(on_body)});
  asio::post(pool_->ioc, [exchange] { exchange->start(); });
  return exchange;
}

std::string HttpResponseHead::header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers)
    if (name == lower_name) return value;
  return "";
}

}  // namespace deepinfer::bench
