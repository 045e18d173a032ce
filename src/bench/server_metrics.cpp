#include "bench/server_metrics.h"

#include <cmath>
#include <string>

namespace deepinfer::bench {
namespace {

enum class Field {
  kNone, kKvUsage, kQueries, kHits, kPromptTokens, kCachedPromptTokens, kHitRate,
  kSpecDraftTokens, kSpecAcceptedTokens, kSpecDrafts, kSpecDraftTokensAt, kSpecAcceptedTokensAt
};

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
  if (named(name, "spec_decode_draft_tokens_per_pos")) return Field::kSpecDraftTokensAt;
  if (named(name, "spec_decode_accepted_tokens_per_pos") || named(name, "spec_decode_num_accepted_tokens_per_pos"))
    return Field::kSpecAcceptedTokensAt;
  if (named(name, "spec_decode_draft_tokens") || named(name, "spec_decode_num_draft_tokens"))
    return Field::kSpecDraftTokens;
  if (named(name, "spec_decode_accepted_tokens") || named(name, "spec_decode_num_accepted_tokens"))
    return Field::kSpecAcceptedTokens;
  if (named(name, "spec_decode_num_drafts")) return Field::kSpecDrafts;
  return Field::kNone;
}

struct Accumulator {
  double sum = 0;
  int n = 0;
  void add(double v) { sum += v, ++n; }
  std::optional<double> total() const { return n ? std::optional<double>(sum) : std::nullopt; }
  std::optional<double> mean() const { return n ? std::optional<double>(sum / n) : std::nullopt; }
};

// The value of label position="i" in a {labels} block, or -1 (absent, or not a small index).
int position_label(std::string_view labels) {
  constexpr std::string_view kKey = "position=\"";
  size_t at = labels.find(kKey);
  while (at != std::string_view::npos && at > 0 && labels[at - 1] != '{' && labels[at - 1] != ',' &&
         labels[at - 1] != ' ')
    at = labels.find(kKey, at + 1);  // not a label named e.g. "token_position"
  if (at == std::string_view::npos) return -1;
  int value = 0, n_digits = 0;
  for (size_t i = at + kKey.size(); i < labels.size() && labels[i] != '"'; ++i, ++n_digits) {
    if (labels[i] < '0' || labels[i] > '9' || n_digits >= 4) return -1;
    value = value * 10 + (labels[i] - '0');
  }
  return n_digits > 0 ? value : -1;
}

void add_at(std::vector<double>& v, int position, double value) {
  if (position < 0) return;
  if (v.size() <= size_t(position)) v.resize(size_t(position) + 1, 0.0);
  v[size_t(position)] += value;
}

}  // namespace

ServerMetrics parse_server_metrics(std::string_view text) {
  Accumulator kv, queries, hits, prompt, cached, hit_rate, spec_drafted, spec_accepted, spec_drafts;
  std::vector<double> drafted_at, accepted_at;
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
    std::string_view labels;
    if (line[name_end] == '{') {
      const size_t close = line.find('}', name_end);
      if (close == std::string_view::npos) continue;
      labels = line.substr(name_end, close + 1 - name_end);
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
      case Field::kSpecDraftTokens: spec_drafted.add(value); break;
      case Field::kSpecAcceptedTokens: spec_accepted.add(value); break;
      case Field::kSpecDrafts: spec_drafts.add(value); break;
      case Field::kSpecDraftTokensAt: add_at(drafted_at, position_label(labels), value); break;
      case Field::kSpecAcceptedTokensAt: add_at(accepted_at, position_label(labels), value); break;
      case Field::kNone: break;
    }
  }
  if (!queries.n && !hits.n && cached.n) queries = prompt, hits = cached;
  ServerMetrics m{kv.mean(), queries.total(), hits.total(), hit_rate.mean()};
  m.spec_draft_tokens = spec_drafted.total();
  m.spec_accepted_tokens = spec_accepted.total();
  m.spec_drafts = spec_drafts.total();
  m.spec_draft_tokens_at = std::move(drafted_at);
  m.spec_accepted_tokens_at = std::move(accepted_at);
  return m;
}

}  // namespace deepinfer::bench
