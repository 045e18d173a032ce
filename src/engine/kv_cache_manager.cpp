#include "engine/kv_cache_manager.h"

#include <algorithm>
#include <climits>

#include "core/check.h"
#include "model/forward_batch.h"

namespace deepinfer {

KvCacheManager::KvCacheManager(int block_size, const std::vector<KvKindBlocks>& kinds, bool enable_prefix_caching,
                               bool hash_provenance)
    : block_size_(block_size), prefix_caching_(enable_prefix_caching), hash_provenance_(hash_provenance) {
  DI_CHECK(block_size > 0 && !kinds.empty() && kinds.size() <= size_t(kMaxKvKinds));
  for (const KvKindBlocks& k : kinds) {
    kinds_.emplace_back(block_size, k.lookback);
    pools_.emplace_back(k.n_blocks);
  }
}

double KvCacheManager::usage() const {
  double u = 0;
  for (const BlockPool& p : pools_) u = std::max(u, 1.0 - double(p.n_free()) / p.n_blocks());
  return u;
}

int KvCacheManager::max_tokens_per_sequence() const {
  auto fits = [&](int n_tokens) {
    for (size_t k = 0; k < kinds_.size(); ++k) {
      if (kinds_[k].n_blocks_resident(n_tokens) > pools_[k].n_blocks()) return false;
    }
    return true;
  };
  int hi = INT32_MAX / 2;  // lookback kinds alone bound nothing
  for (size_t k = 0; k < kinds_.size(); ++k) {
    if (kinds_[k].lookback() == 0) hi = std::min(hi, pools_[k].n_blocks() * block_size_);
  }
  int lo = 0;  // fits(lo); the answer is in [lo, hi]
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
    const int n_generated =
        hash_provenance_ ? std::clamp(int(i + 1) * block_size_ - seq.n_prompt(), 0, block_size_) : 0;
    hashes.push_back(
        hash_block(i == 0 ? nullptr : &hashes[i - 1], tokens.subspan(i * block_size_, block_size_), n_generated));
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
      h = kinds_[k].n_blocks_hit(h, [&](int i) { return pools_[k].find({hashes[size_t(i)], k}).has_value(); });
    }
  }
  return h * block_size_;
}

bool KvCacheManager::admit(Sequence& seq, int n_hit, int n_new) {
  DI_CHECK(n_hit % block_size_ == 0 && n_new > 0 && n_hit + n_new <= seq.n_tokens());
  const int n_hit_blocks = n_hit / block_size_;
  std::vector<std::vector<int32_t>> hits(kinds_.size());
  for (uint32_t k = 0; k < kinds_.size(); ++k) {
    DI_CHECK(seq.block_tables()[k].empty());
    int n_revived = 0;
    for (int i = kinds_[k].first_live_block(n_hit); i < n_hit_blocks; ++i) {
      const auto b = pools_[k].find({seq.block_hashes()[size_t(i)], k});
      DI_CHECK(b.has_value());
      if (pools_[k].ref_count(*b) == 0) ++n_revived;
      hits[k].push_back(*b);
    }
    if (kinds_[k].n_blocks(n_hit + n_new) - n_hit_blocks > pools_[k].n_free() - n_revived) return false;
  }
  for (uint32_t k = 0; k < kinds_.size(); ++k) {
    auto& table = seq.block_tables()[k];
    table.assign(size_t(n_hit_blocks) - hits[k].size(), -1);
    for (int32_t b : hits[k]) {
      pools_[k].ref(b);
      table.push_back(b);
    }
    stats_.n_evicted_blocks += pools_[k].allocate(kinds_[k].n_blocks(n_hit + n_new) - n_hit_blocks, table);
  }
  seq.n_blocks_filed = n_hit_blocks;
  seq.set_n_computed(n_hit);
  stats_.n_query_tokens += uint64_t(seq.n_tokens());
  stats_.n_hit_tokens += uint64_t(n_hit);
  return true;
}

void KvCacheManager::release_dead_blocks(Sequence& seq) {
  for (size_t k = 0; k < kinds_.size(); ++k) {
    auto& table = seq.block_tables()[k];
    const size_t live = std::min(table.size(), size_t(kinds_[k].first_live_block(seq.n_computed())));
    for (size_t i = live; i-- > 0 && table[i] >= 0;) {  // released blocks precede the live ones
      pools_[k].unref(table[i]);
      table[i] = -1;
    }
  }
}

bool KvCacheManager::allocate(Sequence& seq, int n_new, std::vector<BlockCopy>& copies) {
  const int target = seq.n_computed() + n_new;
  DI_CHECK(n_new > 0 && target <= seq.n_tokens());
  release_dead_blocks(seq);
  // The block the first new token goes to; shared only if partially filled (a fork's tail).
  const size_t write_block = size_t(seq.n_computed() / block_size_);
  const bool partial = seq.n_computed() % block_size_ != 0;
  auto shared = [&](size_t k) {
    const auto& table = seq.block_tables()[k];
    return partial && write_block < table.size() && pools_[k].ref_count(table[write_block]) > 1;
  };
  for (size_t k = 0; k < kinds_.size(); ++k) {
    const int n_need = std::max(0, kinds_[k].n_blocks(target) - int(seq.block_tables()[k].size())) + int(shared(k));
    if (n_need > pools_[k].n_free()) return false;
  }
  for (size_t k = 0; k < kinds_.size(); ++k) {
    auto& table = seq.block_tables()[k];
    if (shared(k)) {
      std::vector<int32_t> fresh;
      stats_.n_evicted_blocks += pools_[k].allocate(1, fresh);
      copies.push_back({int(k), table[write_block], fresh[0]});
      pools_[k].unref(table[write_block]);
      table[write_block] = fresh[0];
    }
    stats_.n_evicted_blocks += pools_[k].allocate(std::max(0, kinds_[k].n_blocks(target) - int(table.size())), table);
  }
  return true;
}

void KvCacheManager::file_computed_blocks(Sequence& seq) {
  if (!prefix_caching_) return;
  hash_full_blocks(seq);
  const int n_full = seq.n_computed() / block_size_;
  for (int i = seq.n_blocks_filed; i < n_full; ++i) {
    for (uint32_t k = 0; k < kinds_.size(); ++k) {
      const int32_t b = seq.block_tables()[k][size_t(i)];
      if (b >= 0) pools_[k].file(b, {seq.block_hashes()[size_t(i)], k});
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
  for (size_t k = 0; k < kinds_.size(); ++k) {
    for (int32_t b : child.block_tables()[k]) {
      if (b >= 0) pools_[k].ref(b);
    }
  }
  child.n_blocks_filed = parent.n_blocks_filed;
}

void KvCacheManager::free(Sequence& seq) {
  for (size_t k = 0; k < kinds_.size(); ++k) {
    auto& table = seq.block_tables()[k];
    for (auto it = table.rbegin(); it != table.rend(); ++it) {
      if (*it >= 0) pools_[k].unref(*it);
    }
    table.clear();
  }
  seq.n_blocks_filed = 0;
}

std::vector<std::pair<uint32_t, int>> KvCacheManager::prefix_hit_slots(int n_blocks) const {
  std::vector<std::pair<uint32_t, int>> slots;
  for (uint32_t k = 0; k < kinds_.size(); ++k) {
    for (int i = kinds_[k].first_live_block(n_blocks * block_size_); i < n_blocks; ++i) slots.emplace_back(k, i);
  }
  return slots;
}

std::optional<int32_t> KvCacheManager::pin_filed(uint32_t kind, const BlockHash& hash) {
  const auto b = pools_[kind].find({hash, kind});
  if (b) pools_[kind].ref(*b);
  return b;
}

bool KvCacheManager::allocate_unfiled(uint32_t kind, int n, std::vector<int32_t>& out) {
  if (n > pools_[kind].n_free()) return false;
  stats_.n_evicted_blocks += pools_[kind].allocate(n, out);
  return true;
}

int32_t KvCacheManager::file_held(uint32_t kind, int32_t block, const BlockHash& hash) {
  if (pools_[kind].file(block, {hash, kind})) return block;
  const int32_t held = *pin_filed(kind, hash);
  pools_[kind].unref(block);
  return held;
}

}  // namespace deepinfer
