#include "dist/router/upstream_pool.h"

#include <pthread.h>

namespace deepinfer::router {

UpstreamPool::UpstreamPool(const std::vector<bench::Endpoint>& endpoints) : guard_(ioc_.get_executor()) {
  for (const auto& e : endpoints) clients_.push_back(std::make_unique<bench::HttpClient>(ioc_, e));
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "di-upstream");
    ioc_.run();
  });
}

UpstreamPool::~UpstreamPool() { stop(); }

void UpstreamPool::stop() {
  guard_.reset();
  ioc_.stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace deepinfer::router
