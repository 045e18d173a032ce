// BackgroundWorker: one thread for every task, each task seen finished by wait(), exceptions
// carried to wait(), and a task in flight at destruction finished first.
#include "engine/background_worker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <stdexcept>
#include <thread>

namespace deepinfer {
namespace {

TEST(BackgroundWorker, RunsEveryTaskOnOneLongLivedThread) {
  BackgroundWorker w;
  std::set<std::thread::id> threads;
  int sum = 0;
  for (int i = 1; i <= 200; ++i) {
    w.start([&, i] {
      threads.insert(std::this_thread::get_id());
      sum += i;
    });
    EXPECT_TRUE(w.busy());
    w.wait();  // the task's writes are visible after wait()
    EXPECT_FALSE(w.busy());
    EXPECT_EQ(sum, i * (i + 1) / 2);
  }
  ASSERT_EQ(threads.size(), 1u);
  EXPECT_NE(*threads.begin(), std::this_thread::get_id());
  w.wait();  // nothing in flight: returns at once
}

TEST(BackgroundWorker, WaitBlocksUntilTheTaskEnds) {
  BackgroundWorker w;
  std::atomic<bool> release{false}, finished{false};
  w.start([&] {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    finished = true;
  });
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    release = true;
  });
  w.wait();
  EXPECT_TRUE(finished.load());
  releaser.join();
}

TEST(BackgroundWorker, ExceptionsReachWaitAndTheWorkerGoesOn) {
  BackgroundWorker w;
  w.start([] { throw std::runtime_error("mask failed"); });
  EXPECT_THROW(w.wait(), std::runtime_error);
  int ran = 0;
  w.start([&] { ran = 1; });
  w.wait();
  EXPECT_EQ(ran, 1);
}

TEST(BackgroundWorker, DestructionFinishesATaskInFlight) {
  std::atomic<bool> finished{false};
  {
    BackgroundWorker w;
    w.start([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      finished = true;
    });
  }
  EXPECT_TRUE(finished.load());
}

}  // namespace
}  // namespace deepinfer
