#include "engine/output_stream.h"

#include <gtest/gtest.h>

#include <thread>

namespace deepinfer {
namespace {

RequestOutput update(int sample, int32_t token, FinishReason reason = FinishReason::kNone) {
  RequestOutput u;
  u.sample_index = sample;
  u.token_ids = {token};
  u.logprobs = {{-float(token), {}}};
  u.finish_reason = reason;
  return u;
}

TEST(OutputStream, MergesUpdatesNotTakenYetPerSample) {
  OutputStream s(2);
  s.push(update(0, 1));
  s.push(update(1, 2));
  s.push(update(0, 3));
  s.push(update(0, 4, FinishReason::kLength));
  auto a = s.try_next();
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->sample_index, 0);
  EXPECT_EQ(a->token_ids, (std::vector<int32_t>{1, 3, 4}));
  ASSERT_EQ(a->logprobs.size(), 3u);
  EXPECT_EQ(a->logprobs[2].logprob, -4.0f);
  EXPECT_EQ(a->finish_reason, FinishReason::kLength);
  EXPECT_FALSE(s.done()) << "sample 1 is still running";
  auto b = s.try_next();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->token_ids, (std::vector<int32_t>{2}));
  EXPECT_FALSE(s.try_next().has_value());
  s.push(update(1, 5, FinishReason::kStop));
  EXPECT_FALSE(s.done()) << "an update is pending";
  EXPECT_TRUE(s.next().has_value());
  EXPECT_TRUE(s.done());
  EXPECT_FALSE(s.next().has_value()) << "next() does not block once done";
}

TEST(OutputStream, NextBlocksUntilAPushAndNotifyRunsOnEveryPush) {
  OutputStream s(1);
  int n_notified = 0;
  s.set_notify([&] { ++n_notified; });
  std::thread producer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    s.push(update(0, 7, FinishReason::kStop));
  });
  auto u = s.next();
  producer.join();
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->token_ids, (std::vector<int32_t>{7}));
  EXPECT_EQ(n_notified, 1);
  EXPECT_FALSE(s.next().has_value());
}

}  // namespace
}  // namespace deepinfer
