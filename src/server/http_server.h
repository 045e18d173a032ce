// HttpServer: an asynchronous HTTP/1.1 server (Boost.Beast/Asio, kept inside http_server.cpp)
// with no thread per connection. Each request is handed to a Handler with an HttpResponder that
// any thread may use to answer, at once or as a stream of chunks (Server-Sent Events).
//
// Limits enforced before the handler runs: header bytes (431), body bytes (413, before the body is
// read when Content-Length says so), a read timeout for slow or stalled clients.
// "Expect: 100-continue" is answered once the header is accepted. While a response is pending, a
// client that closes its connection is noticed and reported through the responder's disconnect
// callback, also when it has pipelined further requests (up to max_body_bytes + max_header_bytes
// of them are buffered while it waits). HTTP/1.0 clients get streams without chunked encoding,
// ended by closing the connection.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace deepinfer {

struct HttpRequest {
  std::string method;                         // "GET", "POST", ...
  std::string target;                         // path and query, e.g. "/v1/models"
  std::map<std::string, std::string> headers; // names lower-cased
  std::string body;

  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? "" : it->second;
  }
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// Thread-safe; every method may be called from any thread. Exactly one of send() or
// begin_stream() ... end() answers a request; calls after the connection closed are dropped.
class HttpResponder {
 public:
  virtual ~HttpResponder() = default;
  virtual void send(int status, const std::string& content_type, std::string body, HttpHeaders headers = {}) = 0;
  // Starts a chunked response; write() sends each chunk as soon as the socket allows.
  virtual void begin_stream(int status, const std::string& content_type, HttpHeaders headers = {}) = 0;
  virtual void write(std::string chunk) = 0;
  virtual void end() = 0;
  // True once the client has gone (closed, reset, or too slow to keep up with the stream).
  virtual bool disconnected() const = 0;
  // Called once, from a network thread, when the client goes before the response is complete.
  // If it has already gone, called at once.
  virtual void on_disconnect(std::function<void()> callback) = 0;
  // Called once, from a network thread, when everything written so far has gone to the socket
  // (at once if nothing is pending): a relay reads its next piece then, so that a slow client
  // holds back its source instead of growing this queue. Not called after a disconnect.
  virtual void when_flushed(std::function<void()> callback) { callback(); }
};

using HttpHandler = std::function<void(HttpRequest request, std::shared_ptr<HttpResponder> responder)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                          // 0: any free port (see HttpServer::port)
  int n_threads = 2;                        // network threads
  size_t max_body_bytes = 8u << 20;         // larger bodies: 413
  size_t max_header_bytes = 16u << 10;      // larger headers: 431
  int read_timeout_seconds = 30;            // for a whole request to arrive
  size_t max_buffered_write_bytes = 8u << 20;  // a stream reader this far behind is dropped (one larger answer is sent)
  // Told of every request refused before the handler ran: its target ("" if unread) and status.
  std::function<void(const std::string& target, int status)> on_reject;
};

class HttpServer {
 public:
  static Result<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options, HttpHandler handler);
  ~HttpServer();

  int port() const;
  size_t open_connections() const;
  // Requests handed to the handler whose answer has not all reached the socket yet, and whose
  // client is still there: a graceful shutdown waits for them before stop().
  size_t responses_in_progress() const;
  // Closes the listening socket; open connections continue.
  void stop_accepting();
  // Closes every connection, dropping what is still queued, and joins the network threads.
  void stop();

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer
