#include "engine/block_pool.h"

#include "core/check.h"

namespace deepinfer {

BlockPool::BlockPool(int n_blocks)
    : ref_count_(size_t(n_blocks), 0),
      filed_key_(size_t(n_blocks)),
      prev_(size_t(n_blocks) + 1),
      next_(size_t(n_blocks) + 1) {
  DI_CHECK(n_blocks > 0);
  const int32_t sentinel = n_blocks;
  prev_[sentinel] = next_[sentinel] = sentinel;
  for (int32_t b = 0; b < n_blocks; ++b) queue_push_back(b);
}

int BlockPool::allocate(int n, std::vector<int32_t>& out) {
  DI_CHECK(n >= 0 && n <= n_free_);
  const int32_t sentinel = n_blocks();
  int n_evicted = 0;
  for (int i = 0; i < n; ++i) {
    const int32_t b = next_[sentinel];
    queue_remove(b);
    if (filed_key_[b]) {
      index_.erase(*filed_key_[b]);
      filed_key_[b].reset();
      ++n_evicted;
    }
    ref_count_[b] = 1;
    out.push_back(b);
  }
  return n_evicted;
}

void BlockPool::ref(int32_t block) {
  if (ref_count_[block]++ == 0) queue_remove(block);
}

void BlockPool::unref(int32_t block) {
  DI_CHECK(ref_count_[block] > 0);
  if (--ref_count_[block] > 0) return;
  if (filed_key_[block]) {
    queue_push_back(block);
  } else {
    queue_push_front(block);
  }
}

std::optional<int32_t> BlockPool::find(const BlockKey& key) const {
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

bool BlockPool::file(int32_t block, const BlockKey& key) {
  DI_CHECK(ref_count_[block] > 0 && !filed_key_[block]);
  if (!index_.emplace(key, block).second) return false;
  filed_key_[block] = key;
  return true;
}

void BlockPool::queue_remove(int32_t block) {
  next_[prev_[block]] = next_[block];
  prev_[next_[block]] = prev_[block];
  --n_free_;
}

void BlockPool::queue_push_front(int32_t block) {
  const int32_t sentinel = n_blocks();
  prev_[block] = sentinel;
  next_[block] = next_[sentinel];
  prev_[next_[sentinel]] = block;
  next_[sentinel] = block;
  ++n_free_;
}

void BlockPool::queue_push_back(int32_t block) {
  const int32_t sentinel = n_blocks();
  next_[block] = sentinel;
  prev_[block] = prev_[sentinel];
  next_[prev_[sentinel]] = block;
  prev_[sentinel] = block;
  ++n_free_;
}

void BlockPool::check_invariants() const {
  const int32_t sentinel = n_blocks();
  std::vector<bool> queued(size_t(n_blocks()), false);
  int n_queued = 0;
  for (int32_t b = next_[sentinel]; b != sentinel; b = next_[b]) {
    DI_CHECK(b >= 0 && b < sentinel);
    DI_CHECK_MSG(!queued[b], "block %d queued twice", b);
    DI_CHECK(prev_[next_[b]] == b);
    queued[b] = true;
    ++n_queued;
  }
  DI_CHECK(n_queued == n_free_);
  for (int32_t b = 0; b < sentinel; ++b) {
    DI_CHECK(ref_count_[b] >= 0);
    DI_CHECK_MSG(queued[b] == (ref_count_[b] == 0), "block %d: ref %d, queued %d", b, ref_count_[b], int(queued[b]));
    if (filed_key_[b]) {
      auto it = index_.find(*filed_key_[b]);
      DI_CHECK(it != index_.end() && it->second == b);
    }
  }
  for (const auto& [key, b] : index_) DI_CHECK(filed_key_[b] && *filed_key_[b] == key);
}

}  // namespace deepinfer
