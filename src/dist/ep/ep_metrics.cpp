#include "dist/ep/ep_metrics.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

namespace deepinfer {
namespace {

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

template <class T>
void per_expert(std::string& out, const char* name, const ExpertLoad::Snapshot& s,
                const std::vector<std::vector<T>>& values) {
  for (size_t i = 0; i < values.size(); ++i)
    for (size_t e = 0; e < values[i].size(); ++e)
      out += std::string(name) + "{layer=\"" + std::to_string(s.moe_layers[i]) + "\",expert=\"" + std::to_string(e) +
             "\"} " + std::to_string(values[i][e]) + "\n";
}

}  // namespace

std::string ep_metrics_text(const ExpertLoad::Snapshot& s, const ExchangeStats& x) {
  std::string out;
  header(out, "deepinfer_ep_expert_tokens_total", "counter", "Tokens this rank's rows routed to each expert");
  per_expert(out, "deepinfer_ep_expert_tokens_total", s, s.routed);
  header(out, "deepinfer_ep_window_expert_tokens", "gauge", "Tokens of all ranks to each expert over the last EPLB window");
  per_expert(out, "deepinfer_ep_window_expert_tokens", s, s.window);
  header(out, "deepinfer_ep_expert_copies", "gauge", "Expert slots holding each expert");
  per_expert(out, "deepinfer_ep_expert_copies", s, s.copies);
  header(out, "deepinfer_ep_window_rank_tokens", "gauge",
         "Tokens of the last EPLB window each rank computes under the current placement");
  for (size_t i = 0; i < s.window.size(); ++i) {
    // Each expert's window tokens split evenly over its copies; a rank's share sums its slots.
    std::vector<double> per_rank(size_t(s.n_ranks), 0.0);
    for (size_t k = 0; k < s.slot_expert[i].size(); ++k) {
      const size_t e = size_t(s.slot_expert[i][k]);
      per_rank[size_t(s.slot_rank[i][k])] += double(s.window[i][e]) / std::max(1, s.copies[i][e]);
    }
    for (size_t r = 0; r < per_rank.size(); ++r) {
      char line[160];
      std::snprintf(line, sizeof line, "deepinfer_ep_window_rank_tokens{layer=\"%d\",rank=\"%zu\"} %.1f\n",
                    s.moe_layers[i], r, per_rank[r]);
      out += line;
    }
  }
  header(out, "deepinfer_ep_rank_rows_total", "counter", "Expert rows this rank computed for all ranks");
  out += "deepinfer_ep_rank_rows_total{rank=\"" + std::to_string(s.rank) + "\"} " +
         std::to_string(std::accumulate(s.computed_per_period.begin(), s.computed_per_period.end(), int64_t(0))) + "\n";
  header(out, "deepinfer_ep_rebalances_total", "counter", "EPLB rebalances");
  out += "deepinfer_ep_rebalances_total " + std::to_string(s.n_rebalances) + "\n";
  header(out, "deepinfer_ep_exchange_bytes_total", "counter", "Bytes this rank sent to other ranks in expert exchanges");
  out += "deepinfer_ep_exchange_bytes_total " + std::to_string(x.bytes_sent) + "\n";
  header(out, "deepinfer_ep_exchange_seconds_total", "counter", "Seconds this rank spent in expert exchanges");
  char line[96];
  std::snprintf(line, sizeof line, "deepinfer_ep_exchange_seconds_total %.6f\n", x.seconds_exchanging);
  out += line;
  return out;
}

}  // namespace deepinfer
