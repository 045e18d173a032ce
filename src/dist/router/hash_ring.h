// HashRing: consistent hashing of 64-bit keys onto named members (worker URLs), each member at
// `n_virtual_nodes` points of a 64-bit ring (xxHash of "member#i"). A key goes to the first
// eligible member clockwise from it. Skipping an ineligible member's points is the same as
// taking the member off the ring, so when a member leaves (unhealthy, draining, excluded for
// one request) only the keys it held move, each to the next member on the ring, and they come
// back when it returns.
// Not thread-safe; the router builds it once and reads it under its registry's lock.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

namespace deepinfer::router {

class HashRing {
 public:
  explicit HashRing(int n_virtual_nodes = 128);

  void add(const std::string& member);     // no-op if present
  void remove(const std::string& member);  // no-op if absent
  size_t n_members() const { return members_.size(); }

  // The member owning `key` among those for which `eligible` is true; nullopt when none is.
  std::optional<std::string> pick(uint64_t key, const std::function<bool(const std::string&)>& eligible) const;
  std::optional<std::string> pick(uint64_t key) const;

 private:
  int n_virtual_nodes_;
  std::set<std::string> members_;
  std::map<uint64_t, std::string> points_;  // ring position -> member
};

}  // namespace deepinfer::router
