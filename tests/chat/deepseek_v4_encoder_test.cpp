// encode_deepseek_v4 against DeepSeek's own encoder: every "encode" case of
// tests/data/chat/deepseek-v4/golden.jsonl (see deepseek_v4_golden.h) byte for byte, and its ids
// from the real V4 tokenizer; then the bad inputs the server answers with a 400.
#include <gtest/gtest.h>

#include <cstdlib>

#include "chat/deepseek_v4_encoder.h"
#include "deepseek_v4_golden.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::chat {
namespace {

using ojson = nlohmann::ordered_json;
using testing::v4_golden;

const Tokenizer& v4_tokenizer() {
  static const Tokenizer tokenizer = [] {
    auto t = Tokenizer::Load(testing::kV4TokenizerDir);
    if (!t.ok()) {
      ADD_FAILURE() << t.status().message();
      std::abort();
    }
    return *t;
  }();
  return tokenizer;
}

Result<std::string> encode_row(const ojson& row) {
  DI_ASSIGN_OR_RETURN(DeepseekV4Options options, DeepseekV4Options::FromJson(row["thinking_mode"], row["options"]));
  return encode_deepseek_v4(row["messages"], ojson(), options);
}

TEST(DeepseekV4Encoder, EveryGoldenCaseByteIdentical) {
  const auto rows = v4_golden("encode");
  ASSERT_EQ(rows.size(), 29u);
  for (const ojson& row : rows) {
    auto rendered = encode_row(row);
    ASSERT_TRUE(rendered.ok()) << row["name"] << ": " << rendered.status().message();
    EXPECT_EQ(*rendered, row["rendered"].get<std::string>()) << row["name"];
  }
}

TEST(DeepseekV4Encoder, EveryGoldenCaseTokenIdentical) {
  for (const ojson& row : v4_golden("encode")) {
    auto rendered = encode_row(row);
    ASSERT_TRUE(rendered.ok()) << row["name"];
    auto ids = v4_tokenizer().encode(*rendered, /*add_special_tokens=*/false);
    ASSERT_TRUE(ids.ok());
    EXPECT_EQ(*ids, row["ids"].get<std::vector<int32_t>>()) << row["name"];
  }
}

// Request-level tools land on the system message (or a new empty one first), which is the shape
// of the golden's tool conversations: moving them back out must render the same bytes.
TEST(DeepseekV4Encoder, RequestToolsGoOnTheSystemMessage) {
  int n_checked = 0;
  for (const ojson& row : v4_golden("encode")) {
    const ojson& first = row["messages"][0];
    if (first["role"] != "system" || !first.contains("tools")) continue;
    ojson messages = row["messages"];
    const ojson tools = messages[0]["tools"];
    if (first["content"] == "") {
      messages.erase(messages.begin());
    } else {
      messages[0].erase("tools");
    }
    auto options = DeepseekV4Options::FromJson(row["thinking_mode"], row["options"]);
    ASSERT_TRUE(options.ok());
    auto rendered = encode_deepseek_v4(messages, tools, *options);
    ASSERT_TRUE(rendered.ok()) << rendered.status().message();
    EXPECT_EQ(*rendered, row["rendered"].get<std::string>()) << row["name"];
    ++n_checked;
  }
  EXPECT_GE(n_checked, 4);
}

std::string encode_error(const ojson& messages) {
  auto rendered = encode_deepseek_v4(messages, ojson(), DeepseekV4Options{});
  return rendered.ok() ? std::string("(no error)") : rendered.status().message();
}

const ojson kCall = ojson::parse(R"({"role": "assistant", "content": "", "tool_calls": [
  {"id": "call_0", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]})");

TEST(DeepseekV4Encoder, BadInputNamesTheProblem) {
  const ojson user = {{"role", "user"}, {"content", "hi"}};
  ojson bad_args = kCall;
  bad_args["tool_calls"][0]["function"]["arguments"] = "{not json";
  EXPECT_EQ(encode_error(ojson::array({user, bad_args})),
            "messages[1]: tool_calls[0].function.arguments is not valid JSON");
  bad_args["tool_calls"][0]["function"]["arguments"] = "[1, 2]";
  EXPECT_EQ(encode_error(ojson::array({user, bad_args})),
            "messages[1]: tool_calls[0].function.arguments must be a JSON object");

  const ojson orphan = {{"role", "tool"}, {"content", "42"}, {"tool_call_id", "call_0"}};
  EXPECT_EQ(encode_error(ojson::array({user, orphan})),
            "a tool message answers no tool call: no assistant tool_calls before it");
  const ojson wrong_id = {{"role", "tool"}, {"content", "42"}, {"tool_call_id", "call_9"}};
  EXPECT_EQ(encode_error(ojson::array({user, kCall, wrong_id})),
            "tool_call_id 'call_9' matches no tool call of the assistant turn before it");

  EXPECT_EQ(encode_error(ojson::array({{{"role", "robot"}, {"content", "x"}}})), "messages[0]: unknown role 'robot'");
  const ojson image = ojson::parse(R"({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]})");
  EXPECT_EQ(encode_error(ojson::array({image})), "messages[0]: unsupported content part type 'image_url'");
  EXPECT_EQ(encode_error(ojson::array({{{"role", "developer"}, {"content", ""}}})),
            "messages[0]: a developer message needs content");
  EXPECT_EQ(encode_error(ojson::array({{{"role", "user"}, {"content", "x"}, {"task", "poem"}}})),
            "messages[0]: unknown task 'poem'");

  DeepseekV4Options effort;
  effort.reasoning_effort = "medium";
  EXPECT_FALSE(encode_deepseek_v4(ojson::array({user}), ojson(), effort).ok());
  EXPECT_FALSE(DeepseekV4Options::FromJson("fast", ojson::object()).ok());
  EXPECT_FALSE(DeepseekV4Options::FromJson("chat", ojson{{"drop_reasoning", true}}).ok());
}

TEST(DeepseekV4Encoder, TextPartsAndObjectArguments) {
  // A list of text parts renders as its concatenation; arguments given as an object render as
  // their JSON text would (expected text: the golden case "tool_args_non_string_types").
  const ojson parts = ojson::parse(R"([{"role": "user", "content": [{"type": "text", "text": "Hel"},
                                      {"type": "text", "text": "lo!"}]}])");
  auto rendered = encode_deepseek_v4(parts, ojson(), DeepseekV4Options{});
  ASSERT_TRUE(rendered.ok());
  EXPECT_EQ(*rendered, v4_golden("encode")[0]["rendered"].get<std::string>());  // single_user_chat

  for (ojson row : v4_golden("encode")) {
    if (row["name"] != "tool_args_non_string_types") continue;
    ojson& fn = row["messages"][2]["tool_calls"][0]["function"];
    fn["arguments"] = ojson::parse(fn["arguments"].get<std::string>());
    auto again = encode_row(row);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(*again, row["rendered"].get<std::string>());
  }
}

}  // namespace
}  // namespace deepinfer::chat
