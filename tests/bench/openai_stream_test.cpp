#include "bench/openai_stream.h"

#include <gtest/gtest.h>

namespace deepinfer::bench {
namespace {

using nlohmann::json;

TEST(RequestBodyTest, CompletionsAndChat) {
  TurnRequest r;
  r.messages = {{"system", " be brief"}, {"user", " hello"}};
  r.n_tokens_out = 7;
  ApiOptions api;
  api.model = "m";
  json body = json::parse(make_request_body(r, api));
  EXPECT_EQ(body["prompt"], " be brief hello");
  EXPECT_EQ(body["max_tokens"], 7);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_FALSE(body.contains("messages"));

  api.chat = true;
  api.ignore_eos = false;
  api.extra_body = {{"top_k", 1}, {"max_tokens", 9}};
  body = json::parse(make_request_body(r, api));
  EXPECT_EQ(body["messages"][0]["role"], "system");
  EXPECT_EQ(body["messages"][1]["content"], " hello");
  EXPECT_EQ(body["top_k"], 1);
  EXPECT_EQ(body["max_tokens"], 9);  // extra body wins
  EXPECT_FALSE(body.contains("ignore_eos"));
  EXPECT_FALSE(body.contains("prompt"));
  EXPECT_STREQ(api.path(), "/v1/chat/completions");
}

std::string event(const json& j) { return "data: " + j.dump() + "\n\n"; }

json chat_chunk(const json& delta) { return {{"choices", {{{"index", 0}, {"delta", delta}}}}}; }

TEST(StreamReaderTest, TimesOutputChunksAndReadsUsage) {
  StreamReader reader;
  reader.on_body(event(chat_chunk({{"role", "assistant"}, {"content", ""}})), 0.001);  // no output yet
  reader.on_body(event(chat_chunk({{"content", "a"}})), 0.050);
  reader.on_body(event(chat_chunk({{"reasoning_content", "b"}})) + event(chat_chunk({{"content", "c"}})).substr(0, 9), 0.060);
  reader.on_body(event(chat_chunk({{"content", "c"}})).substr(9), 0.070);
  reader.on_body(event({{"choices", json::array()}, {"usage", {{"prompt_tokens", 12}, {"completion_tokens", 3}}}}), 0.071);
  reader.on_body("data: [DONE]\n\n", 0.072);
  RequestRecord record;
  reader.finish(record, 99);
  EXPECT_TRUE(record.ok()) << record.error;
  EXPECT_EQ(record.chunk_times_s, (std::vector<double>{0.050, 0.060, 0.070}));
  EXPECT_DOUBLE_EQ(record.ttft_s(), 0.050);
  EXPECT_EQ(record.n_tokens_in, 12);
  EXPECT_EQ(record.n_tokens_out, 3);
  EXPECT_TRUE(record.usage_reported);
}

TEST(StreamReaderTest, CompletionsWithoutUsageCountChunks) {
  StreamReader reader;
  reader.on_body(event({{"choices", {{{"text", " x"}}}}}) + event({{"choices", {{{"text", " y"}}}}}) + "data: [DONE]\n\n", 0.1);
  RequestRecord record;
  reader.finish(record, 42);
  EXPECT_TRUE(record.ok());
  EXPECT_EQ(record.n_tokens_out, 2);
  EXPECT_EQ(record.n_tokens_in, 42);
  EXPECT_FALSE(record.usage_reported);
}

TEST(StreamReaderTest, ClassifiesFailures) {
  auto finish = [](const std::string& body) {
    StreamReader reader;
    reader.on_body(body, 0.1);
    RequestRecord record;
    reader.finish(record, 1);
    return record.error;
  };
  EXPECT_EQ(finish(event({{"error", {{"message", "overloaded"}}}})), "stream_error");
  EXPECT_EQ(finish("data: {not json\n\n"), "bad_stream");
  EXPECT_EQ(finish(event({{"choices", {{{"text", " x"}}}}})), "incomplete");
  EXPECT_EQ(finish(event({{"choices", {{{"text", " x"}}}}}) + "data: {\"choi"), "bad_stream");
  EXPECT_EQ(finish("data: [DONE]\n\n"), "no_output");

  StreamReader reader;  // a transport error already set stays
  RequestRecord record;
  record.error = "timeout";
  reader.finish(record, 1);
  EXPECT_EQ(record.error, "timeout");
}

}  // namespace
}  // namespace deepinfer::bench
