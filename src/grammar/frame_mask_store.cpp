#include "grammar/frame_mask_store.h"

namespace deepinfer::grammar {

size_t FrameMask::bytes() const {
  size_t n = accepted.size() * sizeof(uint32_t) + uncertain.size() * sizeof(Uncertain);
  for (const Uncertain& u : uncertain) n += u.prefix.size();
  return n;
}

std::shared_ptr<const FrameMask> FrameMaskStore::find(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = masks_.find(key);
  if (it == masks_.end()) return nullptr;
  ++hits_;
  return it->second;
}

std::shared_ptr<const FrameMask> FrameMaskStore::insert(const std::string& key,
                                                        std::shared_ptr<const FrameMask> mask) {
  std::lock_guard lock(mu_);
  auto it = masks_.find(key);
  if (it != masks_.end()) return it->second;
  const size_t cost = key.size() + mask->bytes();
  if (bytes_ + cost > max_bytes_) {
    masks_.clear();
    bytes_ = 0;
  }
  bytes_ += cost;
  masks_.emplace(key, mask);
  return mask;
}

size_t FrameMaskStore::size() {
  std::lock_guard lock(mu_);
  return masks_.size();
}

size_t FrameMaskStore::hits() {
  std::lock_guard lock(mu_);
  return hits_;
}

}  // namespace deepinfer::grammar
