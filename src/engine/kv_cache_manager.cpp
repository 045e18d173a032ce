#include "engine/kv_cache_manager.h"

#include <algorithm>

#include "core/check.h"

namespace deepinfer {

KvCacheManager::KvCacheManager(int n_blocks, int block_size, std::vector<std::unique_ptr<KvKind>> kinds,
                               bool enable_prefix_caching)
    : block_size_(block_size), kinds_(std::move(kinds)), prefix_caching_(enable_prefix_caching), pool_(n_blocks) {
  DI_CHECK(block_size > 0 && !kinds_.empty());
}

int KvCacheManager::max_tokens_per_sequence() const {
  auto fits = [&](int n_tokens) {
    int n = 0;
    for (const auto& kind : kinds_) n += kind->n_blocks(n_tokens);
    return n <= pool_.n_blocks();
  };
  int lo = 0, hi = pool_.n_blocks() * block_size_;  // fits(lo); the answer is in [lo, hi]
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

void KvCacheManager::hash_full_blocks(Sequence& seq) const {
  auto& hashes = seq.block_hashes();
  const auto tokens = seq.tokens();
  for (size_t i = hashes.size(); i < size_t(seq.n_tokens() / block_size_); ++i) {
    hashes.push_back(hash_block(i == 0 ? nullptr : &hashes[i - 1], tokens.subspan(i * block_size_, block_size_)));
  }
}

int KvCacheManager::n_prefix_hit_tokens(Sequence& seq) {
  if (!prefix_caching_) return 0;
  hash_full_blocks(seq);
  const auto& hashes = seq.block_hashes();
  int h = (seq.n_tokens() - 1) / block_size_;
  // Each kind may only lower h; repeat until every kind accepts the same h.
  for (int prev = -1; prev != h;) {
    prev = h;
    for (uint32_t k = 0; k < kinds_.size(); ++k) {
      h = kinds_[k]->n_blocks_hit(h, [&](int i) { return pool_.find({hashes[size_t(i)], k}).has_value(); });
    }
  }
  return h * block_size_;
}

bool KvCacheManager::admit(Sequence& seq, int n_hit, int n_new) {
  DI_CHECK(n_hit % block_size_ == 0 && n_new > 0 && n_hit + n_new <= seq.n_tokens());
  const int n_hit_blocks = n_hit / block_size_;
  std::vector<std::vector<int32_t>> hits(kinds_.size());
  int n_need = 0, n_revived = 0;
  for (uint32_t k = 0; k < kinds_.size(); ++k) {
    DI_CHECK(seq.block_tables()[k].empty());
    for (int i = 0; i < n_hit_blocks; ++i) {
      const auto b = pool_.find({seq.block_hashes()[size_t(i)], k});
      DI_CHECK(b.has_value());
      if (pool_.ref_count(*b) == 0) ++n_revived;
      hits[k].push_back(*b);
    }
    n_need += kinds_[k]->n_blocks(n_hit + n_new) - n_hit_blocks;
  }
  if (n_need > pool_.n_free() - n_revived) return false;
  for (size_t k = 0; k < kinds_.size(); ++k) {
    auto& table = seq.block_tables()[k];
    for (int32_t b : hits[k]) {
      pool_.ref(b);
      table.push_back(b);
    }
    stats_.n_evicted_blocks += pool_.allocate(kinds_[k]->n_blocks(n_hit + n_new) - n_hit_blocks, table);
  }
  seq.n_blocks_filed = n_hit_blocks;
  seq.set_n_computed(n_hit);
  stats_.n_query_tokens += uint64_t(seq.n_tokens());
  stats_.n_hit_tokens += uint64_t(n_hit);
  return true;
}

bool KvCacheManager::allocate(Sequence& seq, int n_new, std::vector<BlockCopy>& copies) {
  const int target = seq.n_computed() + n_new;
  DI_CHECK(n_new > 0 && target <= seq.n_tokens());
  // The block the first new token goes to; shared only if partially filled (a fork's tail).
  const size_t write_block = size_t(seq.n_computed() / block_size_);
  const bool partial = seq.n_computed() % block_size_ != 0;
  auto shared = [&](const std::vector<int32_t>& table) {
    return partial && write_block < table.size() && pool_.ref_count(table[write_block]) > 1;
  };
  int n_need = 0;
  for (size_t k = 0; k < kinds_.size(); ++k) {
    const auto& table = seq.block_tables()[k];
    n_need += std::max(0, kinds_[k]->n_blocks(target) - int(table.size())) + int(shared(table));
  }
  if (n_need > pool_.n_free()) return false;
  for (size_t k = 0; k < kinds_.size(); ++k) {
    auto& table = seq.block_tables()[k];
    if (shared(table)) {
      std::vector<int32_t> fresh;
      stats_.n_evicted_blocks += pool_.allocate(1, fresh);
      copies.push_back({table[write_block], fresh[0]});
      pool_.unref(table[write_block]);
      table[write_block] = fresh[0];
    }
    stats_.n_evicted_blocks += pool_.allocate(std::max(0, kinds_[k]->n_blocks(target) - int(table.size())), table);
  }
  return true;
}

void KvCacheManager::file_computed_blocks(Sequence& seq) {
  if (!prefix_caching_) return;
  hash_full_blocks(seq);
  const int n_full = seq.n_computed() / block_size_;
  for (int i = seq.n_blocks_filed; i < n_full; ++i) {
    for (uint32_t k = 0; k < kinds_.size(); ++k) {
      pool_.file(seq.block_tables()[k][size_t(i)], {seq.block_hashes()[size_t(i)], k});
    }
  }
  seq.n_blocks_filed = std::max(seq.n_blocks_filed, n_full);
}

void KvCacheManager::truncate(Sequence& seq, int n_tokens) {
  const int n_full = n_tokens / block_size_;
  DI_CHECK(seq.n_blocks_filed <= n_full);
  seq.truncate_tokens(n_tokens);
  if (int(seq.block_hashes().size()) > n_full) seq.block_hashes().resize(size_t(n_full));
}

void KvCacheManager::fork(const Sequence& parent, Sequence& child) {
  child.block_tables() = parent.block_tables();
  for (const auto& table : child.block_tables()) {
    for (int32_t b : table) pool_.ref(b);
  }
  child.n_blocks_filed = parent.n_blocks_filed;
}

void KvCacheManager::free(Sequence& seq) {
  for (auto& table : seq.block_tables()) {
    for (auto it = table.rbegin(); it != table.rend(); ++it) pool_.unref(*it);
    table.clear();
  }
  seq.n_blocks_filed = 0;
}

}  // namespace deepinfer
