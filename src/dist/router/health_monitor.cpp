#include "dist/router/health_monitor.h"

#include <boost/asio/post.hpp>

#include <memory>

#include "dist/router/worker_load.h"

namespace deepinfer::router {
namespace {

constexpr auto kTick = std::chrono::milliseconds(50);
constexpr size_t kMaxAnswerBytes = 1u << 20;  // /metrics or /v1/models text kept, at most

}  // namespace

HealthMonitor::HealthMonitor(WorkerRegistry& registry, UpstreamPool& pool, double timeout_s)
    : registry_(registry), pool_(pool), timeout_s_(timeout_s), timer_(pool.ioc()) {}

void HealthMonitor::start() {
  boost::asio::post(pool_.ioc(), [this] { tick(); });
}

nlohmann::json HealthMonitor::model_card() const {
  std::lock_guard lock(mu_);
  return model_card_;
}

void HealthMonitor::tick() {
  for (size_t id : registry_.due_checks(WorkerRegistry::Clock::now())) check(id);
  timer_.expires_after(kTick);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) tick();
  });
}

void HealthMonitor::check(size_t id) {
  pool_.client(id).request("/health", "", timeout_s_, [](std::string_view) {}, [this, id](const bench::HttpResult& r) {
    if (!r.error.empty()) return registry_.report_check(id, false, std::nullopt, WorkerRegistry::Clock::now());
    read_load(id);
    if (registry_.role(id) == WorkerRole::kDecode && !asking_model_ && model_card().is_null()) learn_model(id);
  });
}

void HealthMonitor::read_load(size_t id) {
  auto text = std::make_shared<std::string>();
  pool_.client(id).request(
      "/metrics", "", timeout_s_,
      [text](std::string_view bytes) {
        if (text->size() < kMaxAnswerBytes) text->append(bytes.substr(0, kMaxAnswerBytes - text->size()));
      },
      [this, id, text](const bench::HttpResult& r) {
        std::optional<WorkerLoad> load;
        if (r.error.empty())
          if (auto parsed = parse_worker_load(*text); parsed.ok()) load = parsed.value();
        registry_.report_check(id, true, load, WorkerRegistry::Clock::now());
      });
}

void HealthMonitor::learn_model(size_t id) {
  asking_model_ = true;
  auto text = std::make_shared<std::string>();
  pool_.client(id).request(
      "/v1/models", "", timeout_s_,
      [text](std::string_view bytes) {
        if (text->size() < kMaxAnswerBytes) text->append(bytes.substr(0, kMaxAnswerBytes - text->size()));
      },
      [this, text](const bench::HttpResult& r) {
        asking_model_ = false;
        if (!r.error.empty()) return;
        const auto models = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
        if (!models.is_object() || !models.contains("data") || !models["data"].is_array() || models["data"].empty()) return;
        const auto& card = models["data"][0];
        if (!card.is_object() || !card.contains("id") || !card["id"].is_string()) return;
        std::lock_guard lock(mu_);
        model_card_ = card;
      });
}

}  // namespace deepinfer::router
