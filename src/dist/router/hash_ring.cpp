#include "dist/router/hash_ring.h"

#include <xxhash.h>

namespace deepinfer::router {
namespace {

uint64_t point_of(const std::string& member, int i) {
  const std::string label = member + "#" + std::to_string(i);
  return XXH3_64bits(label.data(), label.size());
}

}  // namespace

HashRing::HashRing(int n_virtual_nodes) : n_virtual_nodes_(n_virtual_nodes < 1 ? 1 : n_virtual_nodes) {}

void HashRing::add(const std::string& member) {
  if (!members_.insert(member).second) return;
  for (int i = 0; i < n_virtual_nodes_; ++i) points_.emplace(point_of(member, i), member);
}

void HashRing::remove(const std::string& member) {
  if (!members_.erase(member)) return;
  for (int i = 0; i < n_virtual_nodes_; ++i) {
    auto it = points_.find(point_of(member, i));
    if (it != points_.end() && it->second == member) points_.erase(it);
  }
}

std::optional<std::string> HashRing::pick(uint64_t key, const std::function<bool(const std::string&)>& eligible) const {
  if (points_.empty()) return std::nullopt;
  auto it = points_.lower_bound(key);
  for (size_t n = 0; n < points_.size(); ++n, ++it) {
    if (it == points_.end()) it = points_.begin();
    if (eligible(it->second)) return it->second;
  }
  return std::nullopt;
}

std::optional<std::string> HashRing::pick(uint64_t key) const {
  return pick(key, [](const std::string&) { return true; });
}

}  // namespace deepinfer::router
