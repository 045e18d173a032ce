#include "bench/sse_parser.h"

#include <gtest/gtest.h>

namespace deepinfer::bench {
namespace {

std::vector<std::string> parse_in_pieces(std::string_view stream, size_t piece) {
  SseParser parser;
  std::vector<std::string> events;
  for (size_t i = 0; i < stream.size(); i += piece) parser.feed(stream.substr(i, piece), events);
  return events;
}

TEST(SseParserTest, SplitsEventsWhateverThePieces) {
  const std::string stream = "data: {\"a\":1}\n\ndata: {\"b\":2}\r\n\r\n: keep-alive comment\n\ndata: [DONE]\n\n";
  for (size_t piece : {1, 2, 3, 7, 1000}) {
    EXPECT_EQ(parse_in_pieces(stream, piece), (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}", "[DONE]"})) << piece;
  }
}

TEST(SseParserTest, JoinsDataLinesAndSkipsOtherFields) {
  EXPECT_EQ(parse_in_pieces("event: x\nid: 3\ndata:one\ndata: two\nretry: 5\n\n", 4),
            (std::vector<std::string>{"one\ntwo"}));
  EXPECT_EQ(parse_in_pieces("data: a\r\rdata: b\r\n\r\n", 1), (std::vector<std::string>{"a", "b"}));
}

TEST(SseParserTest, HoldsAnIncompleteEvent) {
  SseParser parser;
  std::vector<std::string> events;
  parser.feed("data: {\"x\":", events);
  EXPECT_TRUE(events.empty());
  EXPECT_TRUE(parser.pending());
  parser.feed("1}\n", events);
  EXPECT_TRUE(events.empty());
  parser.feed("\n", events);
  EXPECT_EQ(events, (std::vector<std::string>{"{\"x\":1}"}));
  EXPECT_FALSE(parser.pending());
}

}  // namespace
}  // namespace deepinfer::bench
