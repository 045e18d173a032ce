#include "dist/router/worker_load.h"

#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

namespace deepinfer::router {
namespace {

// The value of the sample line `name value [timestamp]`, or nullopt.
std::optional<double> sample_value(std::string_view text, std::string_view name) {
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    if (line.size() <= name.size() || line.substr(0, name.size()) != name) continue;
    if (line[name.size()] != ' ' && line[name.size()] != '\t') continue;
    std::string_view rest = line.substr(name.size());
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
    const std::string value(rest.substr(0, rest.find_first_of(" \t\r")));
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || end != value.c_str() + value.size() || !std::isfinite(v) || v < 0) return std::nullopt;
    return v;
  }
  return std::nullopt;
}

}  // namespace

Result<WorkerLoad> parse_worker_load(std::string_view metrics_text) {
  WorkerLoad load;
  const std::pair<const char*, double*> fields[] = {{"deepinfer_num_requests_running", &load.n_running},
                                                    {"deepinfer_num_requests_waiting", &load.n_waiting},
                                                    {"deepinfer_kv_cache_usage_ratio", &load.kv_usage}};
  for (const auto& [name, out] : fields) {
    const auto v = sample_value(metrics_text, name);
    if (!v) return Status::Error(std::string("/metrics has no valid ") + name);
    *out = *v;
  }
  return load;
}

}  // namespace deepinfer::router
