#include "dist/pd/pd_http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <cctype>
#include <optional>

#include "dist/pd/pd_messages.h"

namespace deepinfer::pd {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

Result<PeerUrl> parse_peer_url(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  auto bad = [&](const std::string& why) { return Status::Error("prefill URL '" + std::string(url.substr(0, 200)) + "': " + why); };
  if (url.substr(0, kScheme.size()) != kScheme) return bad("must start with http://");
  std::string_view rest = url.substr(kScheme.size());
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return bad("must be http://HOST:PORT");
  const std::string_view host = rest.substr(0, colon), port = rest.substr(colon + 1);
  if (port.empty() || port.size() > 5) return bad("bad port");
  for (char c : port)
    if (!std::isdigit(static_cast<unsigned char>(c))) return bad("bad port");
  if (std::stoi(std::string(port)) > 65535 || std::stoi(std::string(port)) == 0) return bad("bad port");
  for (char c : host)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '[' || c == ']' || c == ':'))
      return bad("bad host");
  return PeerUrl{std::string(host), std::string(port)};
}

Result<PdReply> pd_post(const PeerUrl& peer, const std::string& path, std::string body,
                        std::chrono::steady_clock::time_point deadline, const std::function<bool()>& cancelled) {
  asio::io_context ioc;
  asio::ip::tcp::resolver resolver(ioc);
  beast::tcp_stream stream(ioc);
  http::request<http::string_body> req{http::verb::post, path, 11};
  req.set(http::field::host, peer.host + ":" + peer.port);
  req.set(http::field::content_type, std::string(kContentType));
  req.body() = std::move(body);
  req.prepare_payload();
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  std::optional<beast::error_code> done;  // set once the exchange ended, well or not
  const std::string where = peer.host + ":" + peer.port + path;

  resolver.async_resolve(peer.host, peer.port, [&](beast::error_code ec, asio::ip::tcp::resolver::results_type results) {
    if (ec) return done.emplace(ec), void();
    stream.async_connect(results, [&](beast::error_code ec, const asio::ip::tcp::endpoint&) {
      if (ec) return done.emplace(ec), void();
      http::async_write(stream, req, [&](beast::error_code ec, size_t) {
        if (ec) return done.emplace(ec), void();
        http::async_read(stream, buffer, parser, [&](beast::error_code ec, size_t) { done.emplace(ec); });
      });
    });
  });
  while (!done) {
    ioc.run_for(std::chrono::milliseconds(50));
    if (done) break;
    const bool expired = std::chrono::steady_clock::now() >= deadline;
    if (expired || (cancelled && cancelled())) {
      resolver.cancel();
      beast::error_code ignored;
      stream.socket().close(ignored);
      ioc.run();  // the handlers finish with operation_aborted
      return Status::Error(where + ": " + (expired ? "no answer before the deadline" : "cancelled"));
    }
  }
  if (*done) return Status::Error(where + ": " + done->message());
  return PdReply{int(parser.get().result_int()), std::move(parser.get().body())};
}

}  // namespace deepinfer::pd
