#include "server/stop_matcher.h"

#include <algorithm>

namespace deepinfer {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

StopMatcher::Output StopMatcher::push(std::string_view delta) {
  Output out;
  if (stopped_) return out;
  pending_.append(delta);
  if (stops_.empty()) {
    out.text = std::move(pending_);
    pending_.clear();
    return out;
  }
  // The earliest match wins (text before it is emitted).
  size_t first = std::string::npos;
  for (const auto& s : stops_) first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    out.text = pending_.substr(0, first);
    out.stopped = stopped_ = true;
    pending_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stops_) {
    const size_t max_k = std::min(s.size() - 1, pending_.size());
    for (size_t k = max_k; k > hold; --k)
      if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
  }
  out.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::flush() {
  std::string out = std::move(pending_);
  pending_.clear();
  return stopped_ ? std::string() : out;
}

}  // namespace deepinfer
