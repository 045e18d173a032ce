// The prefill URL a router passes in X-DeepInfer-Prefill-Url (untrusted) and the bounded POST.
#include "dist/pd/pd_http_client.h"

#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>

namespace deepinfer::pd {
namespace {

TEST(PeerUrl, AcceptsHttpHostPort) {
  auto u = parse_peer_url("http://127.0.0.1:8001");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, "8001");
  u = parse_peer_url("http://prefill-0.local:65535/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "prefill-0.local");
}

TEST(PeerUrl, RejectsEverythingElse) {
  for (const char* bad : {"", "127.0.0.1:8001", "https://h:1", "http://h", "http://h:", "http://:80", "http://h:0",
                          "http://h:65536", "http://h:123456", "http://h:8a", "http://h:80/v1", "http://h h:80",
                          "http://h\r\nX: y:80", "ftp://h:21"}) {
    EXPECT_FALSE(parse_peer_url(bad).ok()) << bad;
  }
}

TEST(PdPost, GivesUpAtTheDeadlineOnASilentPeer) {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::acceptor silent(ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});  // accepts, never answers
  const PeerUrl peer{"127.0.0.1", std::to_string(silent.local_endpoint().port())};
  const auto start = std::chrono::steady_clock::now();
  auto r = pd_post(peer, "/internal/pd/v1/prefill", "x", start + std::chrono::milliseconds(300));
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("deadline"), std::string::npos) << r.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  bool cancel = true;
  r = pd_post(peer, "/internal/pd/v1/prefill", "x", std::chrono::steady_clock::now() + std::chrono::seconds(60),
              [&] { return cancel; });
  EXPECT_NE(r.status().message().find("cancelled"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace deepinfer::pd
