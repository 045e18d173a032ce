// FakeExpertGroup: the ranks of an expert-parallel group as threads of one process, exchanging
// through shared mailboxes with a barrier per exchange (as a collective would), for tests that
// need no MPI. A group can be made to fail at its n-th exchange.
#pragma once

#include <barrier>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <span>
#include <vector>

#include "model/expert_group.h"

namespace deepinfer::test {

class ExchangeHub {
 public:
  explicit ExchangeHub(int n_ranks)
      : n_(n_ranks), barrier_(n_ranks), mail_(size_t(n_ranks) * size_t(n_ranks)) {}
  int size() const { return n_; }

  // Rank `rank` posts block r of `send` for rank r; returns the blocks posted for it, in rank order.
  std::vector<std::vector<uint8_t>> all_to_all(int rank, const std::vector<std::vector<uint8_t>>& send) {
    for (int r = 0; r < n_; ++r) mail_[size_t(rank * n_ + r)] = send[size_t(r)];
    barrier_.arrive_and_wait();
    std::vector<std::vector<uint8_t>> got;
    for (int r = 0; r < n_; ++r) got.push_back(mail_[size_t(r * n_ + rank)]);
    barrier_.arrive_and_wait();
    return got;
  }

 private:
  int n_;
  std::barrier<> barrier_;
  std::vector<std::vector<uint8_t>> mail_;  // [from * n + to]
};

class FakeExpertGroup final : public ExpertGroup {
 public:
  FakeExpertGroup(ExchangeHub& hub, int rank) : hub_(hub), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return hub_.size(); }

  Status exchange_counts(std::span<const int64_t> send, std::span<int64_t> recv) override {
    DI_RETURN_IF_ERROR(tick());
    std::vector<std::vector<uint8_t>> blocks;
    for (const int64_t v : send) blocks.emplace_back(reinterpret_cast<const uint8_t*>(&v), reinterpret_cast<const uint8_t*>(&v) + 8);
    const auto got = hub_.all_to_all(rank_, blocks);
    for (size_t r = 0; r < got.size(); ++r) std::memcpy(&recv[r], got[r].data(), 8);
    ++n_counts;
    return Status::Ok();
  }
  // The whole exchange happens at start (a barrier); finish only reports.
  Status exchange_start(std::span<const uint8_t> send, std::span<const int64_t> send_bytes, std::span<uint8_t> recv,
                        std::span<const int64_t> recv_bytes) override {
    DI_RETURN_IF_ERROR(tick());
    std::vector<std::vector<uint8_t>> blocks;
    size_t at = 0;
    for (const int64_t n : send_bytes) {
      blocks.emplace_back(send.begin() + long(at), send.begin() + long(at + size_t(n)));
      at += size_t(n);
    }
    const auto got = hub_.all_to_all(rank_, blocks);
    at = 0;
    for (size_t r = 0; r < got.size(); ++r) {
      if (int64_t(got[r].size()) != recv_bytes[r]) return Status::Error("fake group: unexpected block size");
      if (!got[r].empty()) std::memcpy(recv.data() + at, got[r].data(), got[r].size());
      at += got[r].size();
    }
    ++n_exchanges;
    return Status::Ok();
  }
  Status exchange_finish() override { return health(); }
  Status health() const override {
    std::lock_guard lock(mu_);
    return failure_;
  }
  void fail(Status why) override {
    std::lock_guard lock(mu_);
    if (failure_.ok()) failure_ = std::move(why);
  }

  int fail_at_call = -1;  // >= 0: that call (counts and exchanges together, from 0) fails the group
  int n_counts = 0, n_exchanges = 0;

 private:
  Status tick() {
    DI_RETURN_IF_ERROR(health());
    if (n_calls_++ == fail_at_call) {
      fail(Status::Error("fake group: failed on purpose"));
      return health();
    }
    return Status::Ok();
  }

  ExchangeHub& hub_;
  int rank_;
  int n_calls_ = 0;
  mutable std::mutex mu_;
  Status failure_;
};

}  // namespace deepinfer::test
