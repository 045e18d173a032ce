// StopMatcher: stop strings found across any split of the text, nothing emitted then retracted.
// Expected values follow OpenAI's `stop` semantics: output ends right before the first stop string.
#include "server/stop_matcher.h"

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

// Feeds `text` cut at the given byte positions; returns (emitted text, stopped).
std::pair<std::string, bool> feed(const std::vector<std::string>& stops, const std::string& text,
                                  const std::vector<size_t>& cuts) {
  StopMatcher m(stops);
  std::string emitted;
  size_t prev = 0;
  std::vector<size_t> all = cuts;
  all.push_back(text.size());
  for (size_t c : all) {
    auto out = m.push(std::string_view(text).substr(prev, c - prev));
    emitted += out.text;
    prev = c;
    if (out.stopped) return {emitted, true};
  }
  return {emitted + m.flush(), false};
}

TEST(StopMatcher, NoStops) {
  EXPECT_EQ(feed({}, "hello world", {3, 5}), std::make_pair(std::string("hello world"), false));
}

TEST(StopMatcher, EverySplitGivesTheSameResult) {
  const std::string text = "The answer is 42.\nUser: next question";
  const std::vector<std::string> stops = {"\nUser:", "xyz"};
  for (size_t a = 0; a <= text.size(); ++a)
    for (size_t b = a; b <= text.size(); b += 3) {
      auto [out, stopped] = feed(stops, text, {a, b});
      EXPECT_TRUE(stopped);
      EXPECT_EQ(out, "The answer is 42.") << a << "," << b;
    }
}

TEST(StopMatcher, HoldsBackOnlyPossibleStarts) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.push("abc S").text, "abc ");  // "S" may start STOP
  EXPECT_EQ(m.push("T").text, "");          // "ST" too
  EXPECT_EQ(m.push("x").text, "STx");       // decided: not a stop
  EXPECT_EQ(m.push("ST").text, "");
  EXPECT_EQ(m.flush(), "ST");               // generation ended without completing it
}

TEST(StopMatcher, EarliestStopWinsAndLaterTextIsDropped) {
  auto [out, stopped] = feed({"b", "abc"}, "xxabcd", {});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(out, "xx");  // "abc" starts before "b"
  StopMatcher m({"!"});
  EXPECT_TRUE(m.push("hi!there").stopped);
  EXPECT_EQ(m.push("more").text, "");
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, MultibyteText) {
  auto [out, stopped] = feed({"。"}, "你好。再见", {3, 7});
  EXPECT_TRUE(stopped);
  EXPECT_EQ(out, "你好");
}

}  // namespace
}  // namespace deepinfer
