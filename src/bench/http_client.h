// HttpClient: HTTP/1.1 over TCP (no TLS) to one server, asynchronous on one io_context, with a
// pool of keep-alive connections; response bodies are delivered piece by piece as they arrive,
// which is what timing a token stream needs. Beast stays inside http_client.cpp.
#pragma once

#include "core/status.h"

#include <boost/asio/io_context.hpp>

#include <functional>
#include <memory>
#include <string>
#include <string_view>

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

  struct Pool;  // defined in http_client.cpp: the endpoint and its idle connections

 private:
  std::shared_ptr<Pool> pool_;
};

}  // namespace deepinfer::bench
