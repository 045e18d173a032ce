#include "bench/server_metrics.h"

#include <cmath>
#include <string>

namespace deepinfer::bench {
namespace {

enum class Field { kNone, kKvUsage, kQueries, kHits, kPromptTokens, kCachedPromptTokens, kHitRate };

// Whether `name` is `suffix` or ends in "_" or ":" followed by it.
bool named(std::string_view name, std::string_view suffix) {
  if (name == suffix) return true;
  if (name.size() <= suffix.size() || name.substr(name.size() - suffix.size()) != suffix) return false;
  const char before = name[name.size() - suffix.size() - 1];
  return before == '_' || before == ':';
}

Field classify(std::string_view name) {
  constexpr std::string_view kTotal = "_total";
  if (name.size() > kTotal.size() && name.substr(name.size() - kTotal.size()) == kTotal) {
    name.remove_suffix(kTotal.size());
  }
  if (named(name, "kv_cache_usage_ratio") || named(name, "kv_cache_usage_perc") || named(name, "gpu_cache_usage_perc") ||
      named(name, "token_usage")) {
    return Field::kKvUsage;
  }
  if (named(name, "prefix_cache_queries")) return Field::kQueries;
  if (named(name, "prefix_cache_hits")) return Field::kHits;
  if (named(name, "cached_prompt_tokens")) return Field::kCachedPromptTokens;
  if (named(name, "prompt_tokens")) return Field::kPromptTokens;
  if (named(name, "cache_hit_rate")) return Field::kHitRate;  // also prefix_cache_hit_rate
  return Field::kNone;
}

struct Accumulator {
  double sum = 0;
  int n = 0;
  void add(double v) { sum += v, ++n; }
  std::optional<double> total() const { return n ? std::optional<double>(sum) : std::nullopt; }
  std::optional<double> mean() const { return n ? std::optional<double>(sum / n) : std::nullopt; }
};

}  // namespace

ServerMetrics parse_server_metrics(std::string_view text) {
  Accumulator kv, queries, hits, prompt, cached, hit_rate;
  while (!text.empty()) {
    const size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);
    if (line.empty() || line.front() == '#') continue;
    // name[{labels}] value [timestamp]
    const size_t name_end = line.find_first_of("{ \t");
    if (name_end == std::string_view::npos) continue;
    const Field field = classify(line.substr(0, name_end));
    if (field == Field::kNone) continue;
    size_t value_start = name_end;
    if (line[name_end] == '{') {
      const size_t close = line.find('}', name_end);
      if (close == std::string_view::npos) continue;
      value_start = close + 1;
    }
    std::string_view rest = line.substr(value_start);
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
    const std::string value_text(rest.substr(0, rest.find_first_of(" \t\r")));
    char* end = nullptr;
    const double value = std::strtod(value_text.c_str(), &end);
    if (value_text.empty() || end != value_text.c_str() + value_text.size() || !std::isfinite(value)) continue;
    switch (field) {
      case Field::kKvUsage: kv.add(value); break;
      case Field::kQueries: queries.add(value); break;
      case Field::kHits: hits.add(value); break;
      case Field::kPromptTokens: prompt.add(value); break;
      case Field::kCachedPromptTokens: cached.add(value); break;
      case Field::kHitRate: hit_rate.add(value); break;
      case Field::kNone: break;
    }
  }
  if (!queries.n && !hits.n && cached.n) queries = prompt, hits = cached;
  return ServerMetrics{kv.mean(), queries.total(), hits.total(), hit_rate.mean()};
}

}  // namespace deepinfer::bench
