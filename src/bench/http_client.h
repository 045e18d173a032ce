// HttpClient: HTTP/1.1 over TCP (no TLS) to one server, asynchronous on one io_context, with a
// pool of keep-alive connections; response bodies are delivered piece by piece as they arrive,
// which is what timing a token stream needs (the serving benchmark) and relaying one (the P/D
// router, through stream(): any method and headers, the response head, and backpressure).
// Beast stays inside http_client.cpp.
#pragma once

#include "core/status.h"

#include <boost/asio/io_context.hpp>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deepinfer::bench {

// Where a server is: http://HOST[:PORT][/PREFIX]; request paths are appended to PREFIX.
struct Endpoint {
  std::string host;
  std::string port;
  std::string path_prefix;  // "" or "/..." without a trailing slash
};
Result<Endpoint> parse_base_url(std::string_view url);

struct HttpResult {
  int status = 0;      // HTTP status; 0 when no response arrived
  std::string error;   // "" after a complete 2xx response; else connect, timeout, transport
                       // (the connection failed mid-exchange) or http_<status>
  std::string detail;  // the transport error, or the start of an error response's body
};

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// What stream() sends: any method, the path below the endpoint's prefix, headers as given.
struct HttpRequestSpec {
  std::string method = "GET";
  std::string path;
  HeaderList headers;  // besides Host and User-Agent, e.g. {"Content-Type", "application/json"}
  std::string body;
};

// A response's status line and headers (names lower-cased), as stream() reports them.
struct HttpResponseHead {
  int status = 0;
  HeaderList headers;
  std::string header(std::string_view lower_name) const;  // "" when absent
};

// stream()'s bounds: a connection must be made within connect_s, and each later step (writing
// the request, then every wait for more response bytes) within idle_s.
struct StreamTimeouts {
  double connect_s = 5;
  double idle_s = 600;
};

class HttpClient {
 public:
  using BodyFn = std::function<void(std::string_view bytes)>;
  using DoneFn = std::function<void(const HttpResult& result)>;

  HttpClient(boost::asio::io_context& ioc, Endpoint endpoint);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends POST `body` (JSON) to `path`, or GET when body is empty. on_body receives each piece
  // of a 2xx response's body as it arrives; then on_done runs exactly once. The exchange is
  // bounded by timeout_s. A reused connection that the server had closed is retried once on a
  // new one. Call only from a thread running ioc; the callbacks run there too.
  void request(std::string_view path, std::string body, double timeout_s, BodyFn on_body, DoneFn on_done);

  // A relayed exchange. on_head runs once the status line and headers are in; on_body then gets
  // every piece of the body whatever the status, and the next piece is read only after its
  // `resume` has been called (from any thread, once): a slow consumer holds the upstream
  // connection back instead of growing a buffer. on_done runs exactly once, last: error "" after
  // a complete response, else connect, timeout, transport or cancelled (status stays 0 when no
  // head arrived). Call from any thread; the callbacks run on a thread running ioc, which must
  // be a single thread.
  using HeadFn = std::function<void(const HttpResponseHead& head)>;
  using PausedBodyFn = std::function<void(std::string_view bytes, std::function<void()> resume)>;
  class Stream {
   public:
    virtual ~Stream() = default;
    // Closes the connection (any thread); on_done then reports "cancelled" unless it has run.
    virtual void cancel() = 0;
  };
  std::shared_ptr<Stream> stream(HttpRequestSpec spec, StreamTimeouts timeouts, HeadFn on_head, PausedBodyFn on_body,
                                 DoneFn on_done);

  struct Pool;  // defined in http_client.cpp: the endpoint and its idle connections

 private:
  std::shared_ptr<Pool> pool_;
};

}  // namespace deepinfer::bench
