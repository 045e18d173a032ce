#include "dist/router/router_metrics.h"

#include <cstdio>

namespace deepinfer::router {
namespace {

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

// Prometheus label values escape backslash, quote and newline.
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace

const char* outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::kSuccess: return "success";
    case Outcome::kWorkerError: return "worker_error";
    case Outcome::kRejected: return "rejected";
    case Outcome::kNoWorker: return "no_worker";
    case Outcome::kPrefillFailed: return "prefill_failed";
    case Outcome::kUpstreamFailed: return "upstream_failed";
    case Outcome::kCancelled: return "cancelled";
  }
  return "unknown";
}

void RouterMetrics::count(const std::string& endpoint, Outcome outcome) {
  std::lock_guard lock(mu_);
  ++requests_[{endpoint, outcome}];
}

void RouterMetrics::count_upstream_error(const std::string& role, const std::string& url, const std::string& kind) {
  std::lock_guard lock(mu_);
  ++upstream_errors_[{role, url, kind}];
}

std::string RouterMetrics::render(const std::vector<WorkerSnapshot>& workers, bool healthy) const {
  std::string out;
  auto head = [&](const char* name, const char* type, const char* help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  };
  {
    std::lock_guard lock(mu_);
    head("deepinfer_router_requests_total", "counter", "Requests by endpoint and outcome.");
    for (const auto& [key, n] : requests_)
      out += "deepinfer_router_requests_total{endpoint=\"" + label(key.first) + "\",outcome=\"" + outcome_name(key.second) +
             "\"} " + std::to_string(n) + "\n";
    head("deepinfer_router_upstream_errors_total", "counter", "Failed exchanges with workers, by kind.");
    for (const auto& [key, n] : upstream_errors_)
      out += "deepinfer_router_upstream_errors_total{role=\"" + std::get<0>(key) + "\",url=\"" + label(std::get<1>(key)) +
             "\",kind=\"" + std::get<2>(key) + "\"} " + std::to_string(n) + "\n";
  }
  head("deepinfer_router_prefill_retries_total", "counter", "Requests sent again with another prefill worker.");
  out += "deepinfer_router_prefill_retries_total " + std::to_string(n_prefill_retries.load()) + "\n";
  head("deepinfer_router_decode_retries_total", "counter", "Requests sent to another decode worker after a refused connection.");
  out += "deepinfer_router_decode_retries_total " + std::to_string(n_decode_retries.load()) + "\n";
  head("deepinfer_router_healthy", "gauge", "1 when a worker of each role can take requests.");
  out += std::string("deepinfer_router_healthy ") + (healthy ? "1" : "0") + "\n";

  struct Gauge {
    const char* name;
    const char* type;
    const char* help;
    double (*value)(const WorkerSnapshot&);
    bool needs_load;
  };
  static const Gauge kGauges[] = {
      {"deepinfer_router_worker_healthy", "gauge", "1 when the worker's last check or request succeeded.",
       [](const WorkerSnapshot& w) { return w.healthy ? 1.0 : 0.0; }, false},
      {"deepinfer_router_worker_draining", "gauge", "1 while the worker takes no new requests.",
       [](const WorkerSnapshot& w) { return w.draining ? 1.0 : 0.0; }, false},
      {"deepinfer_router_worker_in_flight", "gauge", "The router's requests at the worker now.",
       [](const WorkerSnapshot& w) { return double(w.n_in_flight); }, false},
      {"deepinfer_router_worker_requests_total", "counter", "Requests the router sent to the worker.",
       [](const WorkerSnapshot& w) { return double(w.n_requests); }, false},
      {"deepinfer_router_worker_requests_running", "gauge", "Running sequences, from the worker's /metrics.",
       [](const WorkerSnapshot& w) { return w.load.n_running; }, true},
      {"deepinfer_router_worker_requests_waiting", "gauge", "Waiting sequences, from the worker's /metrics.",
       [](const WorkerSnapshot& w) { return w.load.n_waiting; }, true},
      {"deepinfer_router_worker_kv_cache_usage_ratio", "gauge", "KV-cache usage, from the worker's /metrics.",
       [](const WorkerSnapshot& w) { return w.load.kv_usage; }, true},
  };
  for (const Gauge& g : kGauges) {
    head(g.name, g.type, g.help);
    for (const WorkerSnapshot& w : workers) {
      if (g.needs_load && !w.has_load) continue;
      out += std::string(g.name) + "{role=\"" + role_name(w.role) + "\",url=\"" + label(w.url) + "\"} " + number(g.value(w)) + "\n";
    }
  }
  return out;
}

}  // namespace deepinfer::router
