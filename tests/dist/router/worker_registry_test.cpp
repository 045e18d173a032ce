// WorkerRegistry: workers take requests once a check passes; a failure takes one out until a
// check after its back-off passes; draining stops new requests; prefill choice is sticky per
// key and moves only when its worker leaves; decode choice spreads a burst.
#include "dist/router/worker_registry.h"

#include <gtest/gtest.h>

#include <set>

namespace deepinfer::router {
namespace {

using Clock = WorkerRegistry::Clock;

const std::vector<std::string> kPrefill = {"http://p1:1", "http://p2:2", "http://p3:3"};
const std::vector<std::string> kDecode = {"http://d1:1", "http://d2:2"};

// Every worker checked healthy and idle at t0.
void check_all_healthy(WorkerRegistry& r, Clock::time_point t0) {
  for (size_t id : r.due_checks(t0)) r.report_check(id, true, WorkerLoad{}, t0);
}

TEST(WorkerRegistry, NothingServesBeforeTheFirstCheck) {
  WorkerRegistry r(kPrefill, kDecode, BackoffSchedule{}, 64);
  EXPECT_FALSE(r.serving(WorkerRole::kPrefill));
  EXPECT_FALSE(r.serving(WorkerRole::kDecode));
  EXPECT_FALSE(r.acquire_decode({}).has_value());
  EXPECT_EQ(r.due_checks(Clock::now()).size(), 5u);
  EXPECT_TRUE(r.due_checks(Clock::now()).empty());  // being checked: not due twice
}

TEST(WorkerRegistry, FailureBacksOffAndARecoveredWorkerRejoins) {
  const auto t0 = Clock::now();
  BackoffSchedule b;
  b.interval_s = 0.5, b.initial_s = 1, b.factor = 2, b.max_s = 4;
  WorkerRegistry r({"http://p:1"}, {"http://d:1"}, b, 8);
  for (size_t id : r.due_checks(t0)) r.report_check(id, true, WorkerLoad{}, t0);
  ASSERT_TRUE(r.serving(WorkerRole::kDecode));
  r.report_failure(1, t0);  // a request to it failed
  EXPECT_FALSE(r.serving(WorkerRole::kDecode));
  // Whether the decode worker is due at t0 + s (the prefill worker's checks pass meanwhile).
  auto decode_due = [&](double s) {
    const auto now = t0 + std::chrono::milliseconds(int64_t(s * 1000));
    bool due = false;
    for (size_t id : r.due_checks(now)) {
      if (id == 1) due = true;
      else r.report_check(id, true, WorkerLoad{}, now);
    }
    return due;
  };
  EXPECT_FALSE(decode_due(0.9));
  EXPECT_TRUE(decode_due(1.0));  // 1 s after the failure
  r.report_check(1, false, std::nullopt, t0 + std::chrono::seconds(1));
  EXPECT_FALSE(decode_due(2.9));
  EXPECT_TRUE(decode_due(3.0));  // then 2 s
  r.report_check(1, false, std::nullopt, t0 + std::chrono::seconds(3));
  EXPECT_FALSE(decode_due(6.9));
  EXPECT_TRUE(decode_due(7.0));  // then the cap, 4 s
  EXPECT_FALSE(r.serving(WorkerRole::kDecode));
  r.report_check(1, true, WorkerLoad{}, t0 + std::chrono::seconds(7));  // restarted
  EXPECT_TRUE(r.serving(WorkerRole::kDecode));
  EXPECT_EQ(r.snapshot()[1].n_failures, 0);
}

TEST(WorkerRegistry, PrefillIsStickyPerKeyAndMovesOnlyWhenItsWorkerLeaves) {
  const auto t0 = Clock::now();
  WorkerRegistry r(kPrefill, kDecode, BackoffSchedule{}, 64);
  check_all_healthy(r, t0);
  std::vector<size_t> first;
  std::set<size_t> used;
  for (uint64_t key = 0; key < 300; ++key) {
    const auto id = r.acquire_prefill(key * 0x9e3779b97f4a7c15ull, {});
    ASSERT_TRUE(id.has_value());
    r.release(*id);
    EXPECT_EQ(r.acquire_prefill(key * 0x9e3779b97f4a7c15ull, {}), id);  // the same key, the same worker
    r.release(*id);
    first.push_back(*id);
    used.insert(*id);
  }
  EXPECT_EQ(used.size(), 3u);
  ASSERT_TRUE(r.set_draining(kPrefill[1], true));
  for (uint64_t key = 0; key < 300; ++key) {
    const auto id = *r.acquire_prefill(key * 0x9e3779b97f4a7c15ull, {});
    r.release(id);
    if (first[key] == 1) EXPECT_NE(id, 1u);
    else EXPECT_EQ(id, first[key]);
  }
  // Excluding the worker that failed for this request works the same way.
  for (uint64_t key = 0; key < 50; ++key) {
    const auto id = r.acquire_prefill(key, {0, 2});
    EXPECT_FALSE(id.has_value());  // 1 drains, 0 and 2 excluded
  }
  EXPECT_FALSE(r.prefill_available({0, 2}));
  EXPECT_TRUE(r.prefill_available({0}));
}

TEST(WorkerRegistry, DecodeBurstSpreadsAndDrainingStopsNewRequests) {
  const auto t0 = Clock::now();
  WorkerRegistry r(kPrefill, kDecode, BackoffSchedule{}, 64);
  check_all_healthy(r, t0);
  std::vector<size_t> picks;
  for (int i = 0; i < 6; ++i) picks.push_back(*r.acquire_decode({}));
  int on_first = 0;
  for (size_t id : picks) on_first += id == 3;
  EXPECT_EQ(on_first, 3);  // 3 and 3, before any poll
  ASSERT_TRUE(r.set_draining(kDecode[0], true));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(*r.acquire_decode({}), 4u);
  EXPECT_EQ(r.snapshot()[3].n_in_flight, 3);  // its requests are still in flight
  EXPECT_TRUE(r.snapshot()[3].draining);
  for (int i = 0; i < 3; ++i) r.release(3);
  EXPECT_EQ(r.snapshot()[3].n_in_flight, 0);
  EXPECT_FALSE(r.acquire_decode({4}).has_value());  // the other drains, this one excluded
  ASSERT_TRUE(r.set_draining(kDecode[0], false));
  EXPECT_EQ(*r.acquire_decode({4}), 3u);
  EXPECT_FALSE(r.set_draining("http://nobody:1", true));
}

TEST(WorkerRegistry, PolledLoadSteersDecode) {
  const auto t0 = Clock::now();
  WorkerRegistry r(kPrefill, kDecode, BackoffSchedule{}, 64);
  check_all_healthy(r, t0);
  r.report_check(3, true, WorkerLoad{5, 2, 0.5}, t0);
  r.report_check(4, true, WorkerLoad{1, 0, 0.1}, t0);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(*r.acquire_decode({}), 4u);  // 1..6 against 7
  EXPECT_EQ(*r.acquire_decode({}), 4u);                              // 7 against 7: the lower KV usage
  EXPECT_EQ(*r.acquire_decode({}), 3u);                              // 8 against 7
}

}  // namespace
}  // namespace deepinfer::router
