// UpstreamPool: the router's side towards its workers: one io_context run by one thread (the
// relays and health checks are light; HttpClient wants a single thread) and one HttpClient,
// with its keep-alive connections, per worker id (WorkerRegistry's numbering).
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "bench/http_client.h"

namespace deepinfer::router {

class UpstreamPool {
 public:
  explicit UpstreamPool(const std::vector<bench::Endpoint>& endpoints);
  ~UpstreamPool();  // stop()
  UpstreamPool(const UpstreamPool&) = delete;
  UpstreamPool& operator=(const UpstreamPool&) = delete;

  boost::asio::io_context& ioc() { return ioc_; }
  // HttpClient::request() only from the pool's thread; stream() from any thread.
  bench::HttpClient& client(size_t id) { return *clients_[id]; }
  // Stops the thread; pending callbacks never run.
  void stop();

 private:
  boost::asio::io_context ioc_{1};
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::vector<std::unique_ptr<bench::HttpClient>> clients_;
  std::thread thread_;
};

}  // namespace deepinfer::router
