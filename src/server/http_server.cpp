// Boost.Beast/Asio lives in this translation unit only. Requests are read with Beast's parser;
// responses are serialized here (fixed-length or chunked) and written from a per-connection
// queue on the connection's strand.
#include "server/http_server.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <array>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include <pthread.h>
#include <unordered_map>

namespace deepinfer {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

std::string status_line(int status) {
  const auto reason = http::obsolete_reason(http::int_to_status(unsigned(status)));
  return "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason.data(), reason.size()) + "\r\n";
}

std::string error_json(const std::string& message, const std::string& type) {
  std::string escaped;
  for (char c : message) {
    if (c == '"' || c == '\\') escaped += '\\';
    escaped += c;
  }
  return R"({"error":{"message":")" + escaped + R"(","type":")" + type + R"(","param":null,"code":null}})";
}

class Session;

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  HttpHandler handler;
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::vector<std::thread> threads;
  std::atomic<size_t> n_open{0};
  std::atomic<size_t> n_responding{0};  // see HttpServer::responses_in_progress
  std::mutex sessions_mu;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions;
  std::atomic<bool> stopped{false};

  void accept();
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl& server) : stream_(std::move(socket)), server_(server) {
    server_.n_open.fetch_add(1);
  }
  ~Session() {
    end_response();
    server_.n_open.fetch_sub(1);
  }

  void start() {
    {
      std::lock_guard<std::mutex> lock(server_.sessions_mu);
      server_.sessions[this] = weak_from_this();
    }
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->read_request(); });
  }

  // Everything below runs on the connection's strand.
  void close() {
    if (closed_) return;
    closed_ = true;
    mark_disconnected();
    end_response();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
    on_flushed_.clear();
    std::lock_guard<std::mutex> lock(server_.sessions_mu);
    server_.sessions.erase(this);
  }

  void enqueue(uint64_t generation, std::string bytes, bool last, bool keep_alive) {
    if (closed_ || generation != generation_ || response_done_) return;
    // A reader this far behind a stream is too slow; one large answer alone is not.
    if (!queue_.empty() && queued_bytes_ + bytes.size() > server_.options.max_buffered_write_bytes) return close();
    queued_bytes_ += bytes.size();
    queue_.push_back(std::move(bytes));
    if (last) {
      response_done_ = true;
      keep_alive_ = keep_alive;
    }
    write_next();
  }

  void add_flushed_callback(uint64_t generation, std::function<void()> cb) {
    if (closed_ || generation != generation_) return;
    if (queue_.empty()) return cb();
    on_flushed_.push_back(std::move(cb));
  }

  void add_disconnect_callback(uint64_t generation, std::function<void()> cb) {
    if (generation != generation_ || response_done_) return;
    if (disconnected_) return cb();
    on_disconnect_.push_back(std::move(cb));
  }

  std::atomic<bool>& disconnected_flag() { return disconnected_atomic_; }
  net::any_io_executor executor() { return stream_.get_executor(); }

 private:
  void read_request() {
    if (closed_ || server_.stopped) return close();
    parser_.emplace();
    parser_->body_limit(server_.options.max_body_bytes);
    parser_->header_limit(uint32_t(server_.options.max_header_bytes));
    stream_.expires_after(std::chrono::seconds(server_.options.read_timeout_seconds));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  // The header is in (and within its limits, Content-Length included); answer
  // "Expect: 100-continue" before reading the body.
  void on_header(beast::error_code ec) {
    if (closed_) return;
    if (ec) return on_read(ec);
    auto read_body = [self = shared_from_this()] {
      http::async_read(self->stream_, self->buffer_, *self->parser_,
                       [self](beast::error_code ec, size_t) { self->on_read(ec); });
    };
    const auto expect = parser_->get()[http::field::expect];
    if (parser_->is_done()) return on_read({});
    if (!beast::iequals(expect, "100-continue")) return read_body();
    static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    net::async_write(stream_, net::buffer(kContinue), [self = shared_from_this(), read_body](beast::error_code ec, size_t) {
      if (ec) return self->close();
      read_body();
    });
  }

  void on_read(beast::error_code ec) {
    if (closed_) return;
    if (ec) {
      rejected_target_ = std::string(parser_->get().target());  // "" if the request line was not read
      if (ec == http::error::body_limit) return reject(413, "request body exceeds the limit of " +
                                                               std::to_string(server_.options.max_body_bytes) + " bytes");
      if (ec == http::error::header_limit) return reject(431, "request headers exceed the limit of " +
                                                                  std::to_string(server_.options.max_header_bytes) + " bytes");
      if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::eof ||
          ec == net::error::connection_reset || ec == net::error::operation_aborted)
        return close();
      return reject(400, "malformed HTTP request: " + ec.message());
    }
    stream_.expires_never();
    auto msg = parser_->release();
    HttpRequest req;
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    for (const auto& f : msg) {
      std::string name(f.name_string());
      for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
      req.headers[name] = std::string(f.value());
    }
    req.body = std::move(msg.body());
    request_keep_alive_ = msg.keep_alive();
    request_http10_ = msg.version() < 11;

    ++generation_;
    response_done_ = false;
    disconnected_ = false;
    disconnected_atomic_ = false;
    on_disconnect_.clear();
    begin_response();
    watch_for_disconnect();
    server_.handler(std::move(req), make_responder());
  }

  // While a response is pending, a read tells whether the client is still there: end of stream
  // or an error means it left; bytes are a pipelined next request, kept in buffer_ for later.
  // (A readiness wait would not do: Asio completes it speculatively at once.)
  void watch_for_disconnect() {
    watching_ = true;
    stream_.socket().async_read_some(net::buffer(watch_buf_), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->watching_ = false;
      if (n > 0) {
        auto dst = self->buffer_.prepare(n);
        std::memcpy(dst.data(), self->watch_buf_.data(), n);
        self->buffer_.commit(n);
      }
      if (ec && ec != net::error::operation_aborted) {
        if (!self->response_done_) self->mark_disconnected();
        else self->read_after_watch_ = false, self->close();
      }
      if (self->read_after_watch_) {
        self->read_after_watch_ = false;
        self->read_request();
        return;
      }
      // A pipelined request arrived while the response is pending: keep watching past it, so
      // that a client that then goes is still noticed (within a bound on what is buffered).
      const size_t max_buffered = self->server_.options.max_body_bytes + self->server_.options.max_header_bytes;
      if (!ec && n > 0 && !self->response_done_ && !self->closed_ && self->buffer_.size() < max_buffered)
        self->watch_for_disconnect();
    });
  }

  void mark_disconnected() {
    if (disconnected_) return;
    disconnected_ = true;
    disconnected_atomic_ = true;
    end_response();  // nobody is left to receive it
    auto callbacks = std::move(on_disconnect_);
    on_disconnect_.clear();
    for (auto& cb : callbacks) cb();
  }

  // A request handed to the handler counts until its whole answer is on the socket or its
  // client has gone.
  void begin_response() {
    if (!responding_) server_.n_responding.fetch_add(1);
    responding_ = true;
  }
  void end_response() {
    if (responding_) server_.n_responding.fetch_sub(1);
    responding_ = false;
  }

  // After an early error answer, stop sending but read (and drop) what the client is still
  // sending for a moment, so that it sees the answer instead of a reset.
  void linger() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(std::chrono::seconds(2));
    stream_.async_read_some(net::buffer(watch_buf_), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->close();
      self->linger_reads_ += 1;
      if (self->linger_reads_ > 4096) return self->close();  // at most ~16 MiB drained
      self->linger();
    });
  }

  void reject(int status, const std::string& message) {
    if (server_.options.on_reject) server_.options.on_reject(rejected_target_, status);
    ++generation_;
    response_done_ = false;
    linger_ = true;
    const std::string body = error_json(message, status == 413 ? "request_too_large" : "invalid_request_error");
    std::string bytes = status_line(status) + "Content-Type: application/json\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    enqueue(generation_, std::move(bytes), true, false);
  }

  void write_next() {
    if (writing_ || closed_) return;
    if (queue_.empty()) {
      for (auto& cb : std::exchange(on_flushed_, {})) cb();
      if (!response_done_) return;
      end_response();
      if (linger_) return linger();
      if (!keep_alive_ || server_.stopped) return close();
      if (!watching_) return read_request();
      read_after_watch_ = true;  // the watch read completes (cancelled) before the next request is read
      beast::error_code ec;
      stream_.socket().cancel(ec);
      return;
    }
    writing_ = true;
    net::async_write(stream_, net::buffer(queue_.front()),
                     [self = shared_from_this()](beast::error_code ec, size_t n) {
                       self->writing_ = false;
                       self->queued_bytes_ -= n;
                       self->queue_.pop_front();
                       if (ec) return self->close();
                       self->write_next();
                     });
  }

  std::shared_ptr<HttpResponder> make_responder();

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpServer::Impl& server_;
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;
  bool writing_ = false;
  bool closed_ = false;
  uint64_t generation_ = 0;   // counts requests on this connection
  bool response_done_ = true;
  bool keep_alive_ = false;
  bool request_keep_alive_ = false;
  bool request_http10_ = false;    // HTTP/1.0: no chunked encoding
  std::string rejected_target_;    // target of a request refused in on_read ("" if unread)
  bool disconnected_ = false;
  std::atomic<bool> disconnected_atomic_{false};
  std::vector<std::function<void()>> on_disconnect_;
  std::vector<std::function<void()>> on_flushed_;  // when_flushed callbacks, run once queue_ empties
  std::array<char, 4096> watch_buf_{};
  bool watching_ = false;          // watch_for_disconnect's read is pending
  bool read_after_watch_ = false;  // read the next request once it completes
  bool linger_ = false;            // drain the client's remaining bytes before closing
  bool responding_ = false;        // counted in server_.n_responding
  int linger_reads_ = 0;

  friend class Responder;
};

class Responder final : public HttpResponder {
 public:
  Responder(std::shared_ptr<Session> s, uint64_t generation, bool keep_alive, bool chunked)
      : session_(std::move(s)), generation_(generation), keep_alive_(keep_alive), chunked_(chunked) {}

  void send(int status, const std::string& content_type, std::string body, HttpHeaders headers) override {
    std::string bytes = status_line(status) + "Content-Type: " + content_type +
                        "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" + header_lines(headers) +
                        (keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n") + body;
    post(std::move(bytes), true);
  }

  // HTTP/1.1: chunked. HTTP/1.0 has no chunked encoding: the body runs until the connection
  // closes, so the stream ends the connection.
  void begin_stream(int status, const std::string& content_type, HttpHeaders headers) override {
    if (!chunked_) keep_alive_ = false;
    post(status_line(status) + "Content-Type: " + content_type + "\r\nCache-Control: no-cache\r\n" +
             (chunked_ ? "Transfer-Encoding: chunked\r\n" : "") + header_lines(headers) +
             (keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n"),
         false);
  }

  void write(std::string chunk) override {
    if (chunk.empty()) return;  // an empty chunk would end the stream
    if (!chunked_) return post(std::move(chunk), false);
    char size_line[32];
    std::snprintf(size_line, sizeof size_line, "%zx\r\n", chunk.size());
    post(size_line + std::move(chunk) + "\r\n", false);
  }

  void end() override { post(chunked_ ? "0\r\n\r\n" : "", true); }

  bool disconnected() const override { return session_->disconnected_flag().load(); }

  void when_flushed(std::function<void()> callback) override {
    net::post(session_->executor(), [s = session_, g = generation_, cb = std::move(callback)]() mutable {
      s->add_flushed_callback(g, std::move(cb));
    });
  }

  void on_disconnect(std::function<void()> callback) override {
    net::post(session_->executor(), [s = session_, g = generation_, cb = std::move(callback)]() mutable {
      s->add_disconnect_callback(g, std::move(cb));
    });
  }

 private:
  static std::string header_lines(const HttpHeaders& headers) {
    std::string out;
    for (const auto& [k, v] : headers) out += k + ": " + v + "\r\n";
    return out;
  }
  void post(std::string bytes, bool last) {
    net::post(session_->executor(), [s = session_, g = generation_, b = std::move(bytes), last, ka = keep_alive_]() mutable {
      s->enqueue(g, std::move(b), last, ka);
    });
  }

  std::shared_ptr<Session> session_;
  uint64_t generation_;
  bool keep_alive_;
  bool chunked_;
};

std::shared_ptr<HttpResponder> Session::make_responder() {
  return std::make_shared<Responder>(shared_from_this(), generation_, request_keep_alive_, !request_http10_);
}

}  // namespace

void HttpServer::Impl::accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
    } else {
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::make_shared<Session>(std::move(socket), *this)->start();
    }
    accept();
  });
}

Result<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options, HttpHandler handler) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->handler = std::move(handler);
  beast::error_code ec;
  const auto address = net::ip::make_address(options.host, ec);
  if (ec) return Status::Error("--host '" + options.host + "' is not an IP address");
  const tcp::endpoint endpoint(address, uint16_t(options.port));
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return Status::Error("cannot listen on " + options.host + ":" + std::to_string(options.port) + ": " + ec.message());
  impl->accept();
  for (int i = 0; i < std::max(1, options.n_threads); ++i)
    impl->threads.emplace_back([p = impl.get()] {
      pthread_setname_np(pthread_self(), "di-http");  // for per-thread CPU accounting (bench/server)
      p->ioc.run();
    });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { stop(); }

int HttpServer::port() const { return impl_->acceptor.is_open() ? impl_->acceptor.local_endpoint().port() : -1; }

size_t HttpServer::open_connections() const { return impl_->n_open.load(); }

size_t HttpServer::responses_in_progress() const { return impl_->n_responding.load(); }

void HttpServer::stop_accepting() {
  net::post(impl_->ioc, [p = impl_.get()] {
    beast::error_code ec;
    p->acceptor.close(ec);
  });
}

void HttpServer::stop() {
  if (impl_->stopped.exchange(true)) return;
  stop_accepting();
  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard<std::mutex> lock(impl_->sessions_mu);
    for (auto& [ptr, weak] : impl_->sessions)
      if (auto s = weak.lock()) live.push_back(std::move(s));
  }
  for (auto& s : live) net::post(s->executor(), [s] { s->close(); });
  live.clear();
  impl_->ioc.stop();
  for (auto& t : impl_->threads)
    if (t.joinable()) t.join();
}

}  // namespace deepinfer
