#include "bench/word_text.h"
#include "bench/workload.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace deepinfer::bench {
namespace {

std::vector<TurnRequest> all_turns(const Workload& w, int64_t index) {
  std::vector<TurnRequest> turns;
  auto c = w.conversation(index);
  while (auto t = c->next_turn()) turns.push_back(std::move(*t));
  return turns;
}

WorkloadOptions options(const std::string& kind) {
  WorkloadOptions o;
  o.kind = kind;
  o.seed = 7;
  o.n_conversations = 10;
  o.input_len = *Distribution::Parse("uniform:20:60");
  o.output_len = *Distribution::Parse("uniform:5:9");
  return o;
}

TEST(WorkloadTest, RandomRequestsHaveTheirLengthsAndShareNothing) {
  auto w = make_workload(options("random"));
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)->n_conversations(), 10);
  EXPECT_FALSE((*w)->multi_turn());
  for (int64_t i = 0; i < 10; ++i) {
    auto turns = all_turns(**w, i);
    ASSERT_EQ(turns.size(), 1u);
    const TurnRequest& t = turns[0];
    EXPECT_EQ(WordText::count_tokens(flatten_prompt(t.messages)), t.n_tokens_in);
    EXPECT_GE(t.n_tokens_in, 20);
    EXPECT_LE(t.n_tokens_in, 60);
    EXPECT_GE(t.n_tokens_out, 5);
    EXPECT_LE(t.n_tokens_out, 9);
    EXPECT_EQ(t.messages[0].role, "user");
  }
  EXPECT_NE(all_turns(**w, 0)[0].messages[0].content.substr(0, 30), all_turns(**w, 1)[0].messages[0].content.substr(0, 30));
  // Conversations do not depend on the order they are made in.
  EXPECT_EQ(all_turns(**w, 3)[0].messages[0].content, all_turns(**make_workload(options("random")), 3)[0].messages[0].content);
}

TEST(WorkloadTest, SharedPrefixGroupsShareTheirPrefix) {
  WorkloadOptions o = options("shared-prefix");
  o.n_prefix_groups = 3;
  o.prefix_len = 50;
  auto w = make_workload(o);
  ASSERT_TRUE(w.ok());
  auto prompt = [&](int64_t i) { return all_turns(**w, i)[0].messages[0].content; };
  auto prefix = [&](int64_t i) {
    const std::string p = prompt(i);
    const auto tokens = WordText::split_tokens(p);
    return std::string(p.data(), tokens[49].data() + tokens[49].size());  // the first 50 tokens
  };
  EXPECT_EQ(prefix(0), prefix(3));
  EXPECT_EQ(prefix(1), prefix(7));
  EXPECT_NE(prefix(0), prefix(1));
  EXPECT_NE(prompt(0), prompt(3));
  const TurnRequest t = all_turns(**w, 4)[0];
  EXPECT_EQ(WordText::count_tokens(t.messages[0].content), t.n_tokens_in);
  o.n_prefix_groups = 0;
  EXPECT_FALSE(make_workload(o).ok());
}

TEST(WorkloadTest, AgenticContextGrowsByAppending) {
  WorkloadOptions o = options("agentic");
  o.system_len = 300;
  o.turns = *Distribution::Parse("uniform:3:6");
  o.tool_result_len = *Distribution::Parse("uniform:30:80");
  o.think_time_s = *Distribution::Parse("exponential:0.5");
  auto w = make_workload(o);
  ASSERT_TRUE(w.ok());
  EXPECT_TRUE((*w)->multi_turn());
  std::string system_prompt;
  for (int64_t i = 0; i < 10; ++i) {
    const auto turns = all_turns(**w, i);
    ASSERT_GE(turns.size(), 3u);
    ASSERT_LE(turns.size(), 6u);
    if (i == 0) system_prompt = turns[0].messages[0].content;
    EXPECT_EQ(turns[0].messages[0].role, "system");
    EXPECT_EQ(turns[0].messages[0].content, system_prompt);  // shared by every session
    EXPECT_EQ(WordText::count_tokens(system_prompt), 300);
    for (size_t k = 0; k < turns.size(); ++k) {
      const TurnRequest& t = turns[k];
      EXPECT_EQ(t.messages.back().role, "user");
      EXPECT_EQ(t.messages.size(), 2 + 2 * k);
      EXPECT_EQ(WordText::count_tokens(flatten_prompt(t.messages)), t.n_tokens_in);
      if (k + 1 < turns.size()) {
        const TurnRequest& next = turns[k + 1];
        EXPECT_EQ(flatten_prompt(next.messages).substr(0, flatten_prompt(t.messages).size()), flatten_prompt(t.messages));
        // The previous answer, of the planned length, then the tool result.
        EXPECT_EQ(next.messages[2 * k + 2].role, "assistant");
        EXPECT_EQ(WordText::count_tokens(next.messages[2 * k + 2].content), t.n_tokens_out);
        EXPECT_GT(t.think_time_s, 0);
      } else {
        EXPECT_EQ(t.think_time_s, 0);
      }
    }
  }
  EXPECT_NE(all_turns(**w, 0)[0].messages[1].content, all_turns(**w, 1)[0].messages[1].content);
}

// Trace files named by process and test, so tests running in parallel (ctest -j) never share one.
class ReplayTest : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    paths_.push_back(::testing::TempDir() + "/trace_" + std::to_string(getpid()) + "_" +
                     ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" +
                     std::to_string(paths_.size()) + ".jsonl");
    std::ofstream(paths_.back()) << text;
    return paths_.back();
  }
  void TearDown() override {
    for (const std::string& p : paths_) std::remove(p.c_str());
  }
  std::vector<std::string> paths_;
};

TEST_F(ReplayTest, ReadsEveryPromptFormAndTiming) {
  WorkloadOptions o = options("replay");
  o.n_conversations = 0;
  o.trace_block_len = 16;
  o.trace_speed = 2;
  o.trace_path = write(
      "{\"timestamp\": 1000, \"input_length\": 40, \"output_length\": 3, \"hash_ids\": [5, 9, 11]}\n"
      "\n"
      "{\"timestamp\": 3000, \"input_length\": 20, \"output_length\": 4, \"hash_ids\": [5]}\n"
      "{\"timestamp_ms\": 2000, \"prompt\": \" a b. c\", \"max_tokens\": 2}\n"
      "{\"messages\": [{\"role\": \"system\", \"content\": \" s\"}, {\"role\": \"user\", \"content\": \" u v\"}]}\n");
  auto w = make_workload(o);
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_EQ((*w)->n_conversations(), 4);
  const TurnRequest a = all_turns(**w, 0)[0], b = all_turns(**w, 1)[0], c = all_turns(**w, 2)[0], d = all_turns(**w, 3)[0];
  EXPECT_EQ(a.n_tokens_in, 40);
  EXPECT_EQ(WordText::count_tokens(a.messages[0].content), 40);
  EXPECT_EQ(a.n_tokens_out, 3);
  // Equal hash ids, equal text: b's first 16 tokens are a's.
  const auto ta = WordText::split_tokens(a.messages[0].content), tb = WordText::split_tokens(b.messages[0].content);
  EXPECT_EQ(std::vector(ta.begin(), ta.begin() + 16), std::vector(tb.begin(), tb.begin() + 16));
  EXPECT_NE(std::vector(ta.begin() + 16, ta.begin() + 20), std::vector(tb.begin() + 16, tb.begin() + 20));
  EXPECT_EQ(c.messages[0].content, " a b. c");
  EXPECT_EQ(c.n_tokens_in, 4);
  EXPECT_EQ(c.n_tokens_out, 2);
  EXPECT_EQ(d.messages.size(), 2u);
  EXPECT_EQ(d.messages[0].role, "system");
  EXPECT_GE(d.n_tokens_out, 5);  // drawn from output_len
  EXPECT_DOUBLE_EQ(*(*w)->arrival_s(0), 0.0);  // the earliest timestamp is time zero; speed 2
  EXPECT_DOUBLE_EQ(*(*w)->arrival_s(1), 1.0);
  EXPECT_DOUBLE_EQ(*(*w)->arrival_s(2), 0.5);
  EXPECT_FALSE((*w)->arrival_s(3));

  o.n_conversations = 2;
  EXPECT_EQ((*make_workload(o))->n_conversations(), 2);
}

TEST_F(ReplayTest, NamesTheBadLine) {
  WorkloadOptions o = options("replay");
  o.trace_path = write("{\"prompt\": \" ok\"}\n{\"output_length\": 3}\n");
  auto w = make_workload(o);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find(":2: no 'messages', 'prompt' or 'input_length'"), std::string::npos);
  for (const char* bad : {"not json", "{\"prompt\": 3}", "{\"input_length\": -1}", "{\"input_length\": 4, \"hash_ids\": [\"x\"]}",
                          "{\"messages\": [{\"role\": \"user\"}]}", "{\"prompt\": \" x\", \"timestamp\": \"soon\"}"}) {
    o.trace_path = write(std::string(bad) + "\n");
    EXPECT_FALSE(make_workload(o).ok()) << bad;
  }
  o.trace_path = "/nonexistent/trace.jsonl";
  EXPECT_FALSE(make_workload(o).ok());
  o.kind = "bursty";
  EXPECT_FALSE(make_workload(o).ok());
}

}  // namespace
}  // namespace deepinfer::bench
