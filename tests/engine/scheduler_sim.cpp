#include "scheduler_sim.h"

#include <gtest/gtest.h>

namespace deepinfer::test {

namespace {
std::vector<KvKindBlocks> kind_blocks(int n_blocks, const std::vector<int>& lookbacks) {
  std::vector<KvKindBlocks> kinds;
  for (int l : lookbacks) kinds.push_back({l, n_blocks});
  return kinds;
}
}  // namespace

SchedulerSim::SchedulerSim(int n_blocks, int block_size, SchedulerOptions options, bool prefix_caching,
                           std::vector<int> lookbacks)
    : kv(block_size, kind_blocks(n_blocks, lookbacks), prefix_caching),
      scheduler(options, kv),
      block_size_(block_size),
      shadow_(lookbacks.size(),
              std::vector<std::vector<int32_t>>(size_t(n_blocks), std::vector<int32_t>(size_t(block_size), -1))) {
  for (int l : lookbacks) kinds_.emplace_back(block_size, l);
}

int32_t SchedulerSim::next_token(std::span<const int32_t> tokens, int sample_index) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ uint64_t(sample_index);
  for (int32_t t : tokens) h = (h ^ uint64_t(t)) * 0x100000001B3ull;
  return int32_t((h >> 17) % 1000);
}

uint64_t SchedulerSim::add(std::vector<int32_t> prompt, int n_output, int priority, int n) {
  const uint64_t rid = next_request_++;
  n_output_[rid] = n_output;
  auto seq = std::make_unique<Sequence>(next_seq_++, rid, 0, priority, rid, std::move(prompt), kv.n_kinds(), n - 1);
  live_.insert(&scheduler.add(std::move(seq)));
  return rid;
}

void SchedulerSim::abort(uint64_t request_id) {
  std::vector<Sequence*> victims;
  for (Sequence* s : live_) {
    if (s->request_id() == request_id) victims.push_back(s);
  }
  for (Sequence* s : victims) finish(s, FinishReason::kAbort);
  check_invariants();
}

void SchedulerSim::finish(Sequence* seq, FinishReason reason) {
  outputs_[{seq->request_id(), seq->sample_index()}].assign(seq->output().begin(), seq->output().end());
  live_.erase(seq);
  scheduler.finish(*seq, reason);
}

void SchedulerSim::check_kv(const Sequence& seq) {
  for (size_t k = 0; k < kinds_.size(); ++k) {
    const auto& table = seq.block_tables()[k];
    const int first = kinds_[k].first_live_block(seq.n_computed()) * block_size_;
    for (int p = first; p < seq.n_computed(); ++p) {
      const int32_t b = table[size_t(p / block_size_)];
      ASSERT_GE(b, 0) << "kind " << k << " released position " << p << " before its lookback";
      ASSERT_EQ(shadow_[k][size_t(b)][size_t(p % block_size_)], seq.tokens()[size_t(p)])
          << "kind " << k << " sequence " << seq.id() << " position " << p;
    }
  }
}

const SimChunk* SimStep::of(uint64_t request_id) const {
  for (const auto& c : chunks) {
    if (c.request_id == request_id) return &c;
  }
  return nullptr;
}

SimStep SchedulerSim::step() {
  SchedulerOutput out = scheduler.schedule();
  SimStep record{{}, out.n_preempted, out.block_copies.size()};
  for (const auto& c : out.chunks) record.chunks.push_back({c.seq->request_id(), c.n_new, c.sample, c.seq->n_cached_prompt()});
  EXPECT_LE(out.n_tokens(), scheduler.options().max_num_batched_tokens);
  EXPECT_LE(scheduler.n_running(), scheduler.options().max_num_seqs);
  std::set<const Sequence*> seen;
  for (const auto& copy : out.block_copies) {
    shadow_[size_t(copy.kind)][size_t(copy.dst)] = shadow_[size_t(copy.kind)][size_t(copy.src)];
  }
  for (const auto& c : out.chunks) {
    EXPECT_TRUE(seen.insert(c.seq).second) << "sequence scheduled twice";
    EXPECT_GE(c.n_new, 1);
    check_kv(*c.seq);
    for (size_t k = 0; k < kinds_.size(); ++k) {
      const auto& table = c.seq->block_tables()[k];
      for (int p = c.seq->n_computed(); p < c.seq->n_computed() + c.n_new; ++p) {
        const int32_t b = table[size_t(p / block_size_)];
        EXPECT_EQ(kv.pool(int(k)).ref_count(b), 1) << "kind " << k << ": writing into shared block " << b;
        EXPECT_FALSE(kv.pool(int(k)).is_filed(b)) << "kind " << k << ": writing into filed block " << b;
        shadow_[k][size_t(b)][size_t(p % block_size_)] = c.seq->tokens()[size_t(p)];
      }
    }
  }
  scheduler.update(out);
  for (const auto& c : out.chunks) {
    if (!c.sample) continue;
    Sequence* seq = c.seq;
    std::vector<Sequence*> samples = {seq};
    for (int i = 1; seq->n_pending_forks() > 0; ++i) {
      Sequence& child = scheduler.fork(*seq, next_seq_++, i);
      live_.insert(&child);
      samples.push_back(&child);
    }
    for (Sequence* s : samples) {
      s->append_token(next_token(s->tokens(), s->sample_index()));
      if (s->n_output() == n_output_[s->request_id()]) finish(s, FinishReason::kLength);
    }
  }
  check_invariants();
  return record;
}

int SchedulerSim::run(int max_steps) {
  int n = 0;
  while (scheduler.has_work()) {
    step();
    if (::testing::Test::HasFatalFailure() || ++n > max_steps) {
      ADD_FAILURE() << "no progress after " << n << " steps";
      break;
    }
  }
  return n;
}

void SchedulerSim::check_invariants() {
  for (size_t k = 0; k < kinds_.size(); ++k) {
    const BlockPool& pool = kv.pool(int(k));
    pool.check_invariants();
    std::vector<int> refs(size_t(pool.n_blocks()), 0);
    int n_running = 0;
    for (const Sequence* s : live_) {
      const auto& table = s->block_tables()[k];
      for (int32_t b : table) {
        if (b >= 0) ++refs[size_t(b)];
      }
      if (s->state() == SequenceState::kRunning) {
        ++n_running;
        EXPECT_EQ(int(table.size()), (s->n_computed() + block_size_ - 1) / block_size_);
        check_kv(*s);
        // Filed blocks of this sequence's prefix hold exactly its tokens, wherever they are.
        for (int i = 0; i < s->n_computed() / block_size_ && i < int(s->block_hashes().size()); ++i) {
          if (auto b = pool.find({s->block_hashes()[size_t(i)], uint32_t(k)})) {
            for (int j = 0; j < block_size_; ++j) {
              ASSERT_EQ(shadow_[k][size_t(*b)][size_t(j)], s->tokens()[size_t(i * block_size_ + j)]);
            }
          }
        }
      } else {
        EXPECT_TRUE(table.empty());
        EXPECT_EQ(s->n_computed(), 0);
      }
    }
    EXPECT_EQ(n_running, scheduler.n_running());
    EXPECT_EQ(int(live_.size()) - n_running, scheduler.n_waiting());
    int n_in_use = 0;
    for (int32_t b = 0; b < pool.n_blocks(); ++b) {
      ASSERT_EQ(pool.ref_count(b), refs[size_t(b)]) << "kind " << k << " block " << b;
      n_in_use += refs[size_t(b)] > 0;
    }
    EXPECT_EQ(pool.n_free() + n_in_use, pool.n_blocks());
  }
}

}  // namespace deepinfer::test
