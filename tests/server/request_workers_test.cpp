// RequestWorkers: tasks run off the caller's thread, a full queue refuses instead of growing, and
// stop() runs what was queued.
#include "server/request_workers.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

namespace deepinfer {
namespace {

TEST(RequestWorkers, RunsTasksOnItsOwnThreads) {
  RequestWorkers w(2, 8);
  std::promise<std::thread::id> ran;
  ASSERT_TRUE(w.try_post([&] { ran.set_value(std::this_thread::get_id()); }));
  EXPECT_NE(ran.get_future().get(), std::this_thread::get_id());
}

TEST(RequestWorkers, AFullQueueRefusesAndStopRunsTheQueued) {
  std::atomic<int> done{0};
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::promise<void> started;
  {
    RequestWorkers w(1, 2);
    ASSERT_TRUE(w.try_post([&, gate] {
      started.set_value();
      gate.wait();
      ++done;
    }));
    started.get_future().wait();  // the one thread is busy; the queue holds 2
    EXPECT_TRUE(w.try_post([&] { ++done; }));
    EXPECT_TRUE(w.try_post([&] { ++done; }));
    EXPECT_FALSE(w.try_post([&] { ++done; }));
    release.set_value();
    w.stop();
    EXPECT_EQ(done.load(), 3);
    EXPECT_FALSE(w.try_post([&] { ++done; }));
  }
  EXPECT_EQ(done.load(), 3);
}

}  // namespace
}  // namespace deepinfer
