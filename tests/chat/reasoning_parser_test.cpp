// ReasoningParser. Inputs are shaped like DeepSeek R1 / V3.1 output after the prompts their
// templates render (tests/data/chat/reference/deepseek-r1.jsonl ends prompts with
// "<｜Assistant｜><think>\n", deepseek-v3.1.jsonl with "<think>" or "</think>"); the expected splits
// follow the contract in src/chat/reasoning_parser.h. Every input is also streamed cut at every
// byte position, byte by byte, and in three pieces, and must give the same split.
#include <gtest/gtest.h>

#include "chat/reasoning_parser.h"

namespace deepinfer::chat {
namespace {

struct Case {
  const char* text;
  bool opened;
  const char* reasoning;
  const char* content;
};

const Case kCases[] = {
    {"Okay, 2+2 is 4.\n</think>\n\nThe answer is 4.", true, "Okay, 2+2 is 4.\n", "The answer is 4."},
    {"<think>\nLet me think.\n</think>\n\nDone.", true, "\nLet me think.\n", "Done."},
    {"<think>Plan.</think>Answer <think>not reasoning</think>", false, "Plan.",
     "Answer <think>not reasoning</think>"},
    {"  \n<think>x</think>y", false, "x", "y"},
    {"Hello, no reasoning here.", false, "", "Hello, no reasoning here."},
    {"<thinking is not a marker", false, "", "<thinking is not a marker"},
    {"<thi", false, "", "<thi"},
    {"Still thinking when max_tokens hit </thi", true, "Still thinking when max_tokens hit </thi", ""},
    {"reasoning</think>", true, "reasoning", ""},
    {"</think>\n\n", true, "", ""},
    {"", true, "", ""},
    {"", false, "", ""},
    {"a < b </ c </think> x </think>", true, "a < b </ c ", "x </think>"},
    {"思考：中文😀</think>答案", true, "思考：中文😀", "答案"},
};

ReasoningDelta stream(const std::vector<std::string_view>& pieces, bool opened) {
  ReasoningParser p(opened);
  ReasoningDelta all;
  for (std::string_view piece : pieces) {
    ReasoningDelta d = p.feed(piece);
    all.reasoning += d.reasoning;
    all.content += d.content;
  }
  ReasoningDelta d = p.finish();
  all.reasoning += d.reasoning;
  all.content += d.content;
  return all;
}

TEST(ReasoningParser, SplitsWholeText) {
  for (const Case& c : kCases) {
    ReasoningDelta d = split_reasoning(c.text, c.opened);
    EXPECT_EQ(d.reasoning, c.reasoning) << c.text;
    EXPECT_EQ(d.content, c.content) << c.text;
  }
}

TEST(ReasoningParser, StreamedAtEveryCut) {
  for (const Case& c : kCases) {
    const std::string_view text = c.text;
    for (size_t i = 0; i <= text.size(); ++i) {
      ReasoningDelta d = stream({text.substr(0, i), text.substr(i)}, c.opened);
      EXPECT_EQ(d.reasoning, c.reasoning) << c.text << " cut at " << i;
      EXPECT_EQ(d.content, c.content) << c.text << " cut at " << i;
      for (size_t j = i; j <= text.size(); j += 3) {
        ReasoningDelta d3 = stream({text.substr(0, i), text.substr(i, j - i), text.substr(j)}, c.opened);
        EXPECT_EQ(d3.reasoning + "|" + d3.content, std::string(c.reasoning) + "|" + c.content) << i << "," << j;
      }
    }
    std::vector<std::string_view> bytes;
    for (size_t i = 0; i < text.size(); ++i) bytes.push_back(text.substr(i, 1));
    ReasoningDelta d = stream(bytes, c.opened);
    EXPECT_EQ(d.reasoning, c.reasoning) << c.text << " byte by byte";
    EXPECT_EQ(d.content, c.content) << c.text << " byte by byte";
  }
}

TEST(ReasoningParser, HoldsBackOnlyWhatMayBeAMarker) {
  ReasoningParser p(true);
  EXPECT_EQ(p.feed("abc</th").reasoning, "abc");
  EXPECT_TRUE(p.in_reasoning());
  EXPECT_EQ(p.feed("ink>").reasoning, "");
  EXPECT_FALSE(p.in_reasoning());
  EXPECT_EQ(p.feed("\n\nHi").content, "Hi");
  ReasoningParser q(false);
  EXPECT_EQ(q.feed("Plain").content, "Plain");
}

TEST(ReasoningParser, PromptOpensReasoning) {
  // Prompt endings rendered by the DeepSeek R1 and V3.1 templates (see the file comment).
  EXPECT_TRUE(prompt_opens_reasoning("<｜User｜>Hi<｜Assistant｜><think>\n"));
  EXPECT_TRUE(prompt_opens_reasoning("<｜User｜>Hi<｜Assistant｜><think>"));
  EXPECT_FALSE(prompt_opens_reasoning("<｜User｜>Hi<｜Assistant｜></think>"));
  EXPECT_FALSE(prompt_opens_reasoning("<｜User｜>Hi<｜Assistant｜>"));
  EXPECT_FALSE(prompt_opens_reasoning("<think>a</think>b"));
}

}  // namespace
}  // namespace deepinfer::chat
